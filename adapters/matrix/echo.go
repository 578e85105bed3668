package matrix

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

const (
	// echoCap bounds the transaction ids remembered from /sync: the
	// bot's own recent events, far more than a restart replays.
	echoCap = 4096
	// firstSyncWait bounds how long a keyed send waits for the first
	// sync since Run began (see waitFirstSync).
	firstSyncWait = 10 * time.Second
	// runGrace bounds how long a keyed send after Check waits for Run to
	// begin (the daemon calls it right after Check).
	runGrace = time.Second
	// dupRedactTimeout bounds the redaction of a duplicate.
	dupRedactTimeout = 30 * time.Second
)

// echoes remembers, by transaction id, the bot's own events the
// homeserver echoed in /sync (it marks them with unsigned.transaction_id
// for the access token that sent them), and what the keyed sends of this
// process made of them. See the package doc, "Echoes".
type echoes struct {
	mu    sync.Mutex
	m     map[string]*echo
	order []string // transaction ids, oldest first, for eviction

	// armed is set by Check and Run: a Run is coming or running, whose
	// first sync keyed sends wait for. began is closed when Run begins,
	// synced once its first sync was processed.
	armed      atomic.Bool
	began      chan struct{}
	beganOnce  sync.Once
	synced     chan struct{}
	syncedOnce sync.Once
}

// echo is what is known of one transaction id.
type echo struct {
	room id.RoomID
	// seen are the distinct events the sync showed under it, oldest
	// first; more than one is the homeserver's duplicate.
	seen []id.EventID
	// kept is the event a send of this process returned (to core, which
	// keeps it): of duplicates, the one that stays.
	kept id.EventID
	// pending counts the sends under it in flight: which copy to keep
	// waits for their answer.
	pending int
	// redacted are the copies already redacted.
	redacted map[id.EventID]bool
}

func newEchoes() *echoes {
	return &echoes{m: map[string]*echo{}, began: make(chan struct{}), synced: make(chan struct{})}
}

// get returns the record of txn, made if missing; e.mu is held.
func (e *echoes) get(txn string, room id.RoomID) *echo {
	r := e.m[txn]
	if r != nil {
		return r
	}
	r = &echo{room: room, redacted: map[id.EventID]bool{}}
	e.m[txn] = r
	e.order = append(e.order, txn)
	if len(e.order) > echoCap {
		old := e.order[0]
		e.order = e.order[1:]
		delete(e.m, old)
	}
	return r
}

// begin is called before a keyed send under txn: if the homeserver
// already echoed an event of it, that event is returned and nothing is to
// be sent; otherwise the send is counted in flight until end.
func (e *echoes) begin(txn string, room id.RoomID) (id.EventID, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(txn, room)
	if len(r.seen) > 0 {
		if r.kept == "" {
			r.kept = r.seen[0]
		}
		return r.kept, true
	}
	r.pending++
	return "", false
}

// end is called when a keyed send under txn returned (ev is "" when it
// failed); it returns the duplicates of the kept event to redact.
func (e *echoes) end(txn string, room id.RoomID, ev id.EventID) []id.EventID {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(txn, room)
	r.pending = max(r.pending-1, 0)
	if ev != "" && r.kept == "" {
		r.kept = ev
	}
	return r.duplicates()
}

// saw records an event of the bot's the sync showed; it returns the
// duplicates to redact, if this event made one known.
func (e *echoes) saw(room id.RoomID, ev *event.Event) []id.EventID {
	txn := ev.Unsigned.TransactionID
	if txn == "" || ev.ID == "" {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.get(txn, room)
	for _, s := range r.seen {
		if s == ev.ID {
			return nil
		}
	}
	r.seen = append(r.seen, ev.ID)
	return r.duplicates()
}

// duplicates are the seen events other than the one kept, not redacted
// yet, and marks them redacted (a failed redaction is not tried again:
// best effort). Without a send of this process to say which copy core
// holds, the first the sync showed stays; while a send is in flight
// nothing is decided. e.mu is held.
func (r *echo) duplicates() []id.EventID {
	keep := r.kept
	if keep == "" {
		if r.pending > 0 || len(r.seen) < 2 {
			return nil
		}
		keep = r.seen[0]
	}
	var out []id.EventID
	for _, s := range r.seen {
		if s != keep && !r.redacted[s] {
			r.redacted[s] = true
			out = append(out, s)
		}
	}
	return out
}

// runBegan marks Run as begun: its sync is about to start.
func (e *echoes) runBegan() {
	e.armed.Store(true)
	e.beganOnce.Do(func() { close(e.began) })
}

// firstSynced marks the first sync since Run began as processed.
func (e *echoes) firstSynced() {
	e.syncedOnce.Do(func() { close(e.synced) })
}

// isSynced reports whether the first sync since Run began was processed.
func (e *echoes) isSynced() bool {
	select {
	case <-e.synced:
		return true
	default:
		return false
	}
}

// waitFirstSync holds a keyed send until the first sync since Run began
// was processed, so that a send replayed after a restart is checked
// against what the homeserver already holds: the incremental sync from the
// stored position carries the events the previous process made, with
// their transaction ids. It waits at most firstSyncWait, and at most half
// of what remains before ctx's deadline, so that the send itself still has
// time. The daemon calls Check, lets the outbox go, then calls Run: after
// Check a send waits up to runGrace for Run to begin; a Run that does not
// come (a caller that only sends) disarms the wait until the next Check.
//
// Only the instance holding the sync lease syncs (see Run): on the others
// Run's first attempt at the lease disarms the wait (see standby), and
// their keyed sends rely on the homeserver's transaction cache alone,
// which the instances share as they share the access token. "Run began"
// means the lease is held and the sync starts: an instance that takes the
// sync over arms the wait again for its first sync.
func (a *Adapter) waitFirstSync(ctx context.Context) {
	e := a.echo
	if !e.armed.Load() || e.isSynced() {
		return
	}
	wait := firstSyncWait
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl)/2)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	g := time.NewTimer(min(runGrace, wait))
	defer g.Stop()
	select {
	case <-e.began:
	case <-ctx.Done():
		return
	case <-g.C:
		e.armed.Store(false)
		return
	}
	select {
	case <-e.synced:
	case <-ctx.Done():
	case <-t.C:
		a.log.Warn("sending before the first sync since the start was processed; a message the previous run sent may show twice", "waited", wait)
	}
}

// redactDuplicates redacts the bot's own duplicate events in room: the
// homeserver made a second event for one transaction id (Dendrite does
// when a retry arrives while the first request is still being processed).
// Best effort: a failure is logged, the duplicate then stays.
func (a *Adapter) redactDuplicates(ctx context.Context, room id.RoomID, kept string, dups []id.EventID) {
	for _, ev := range dups {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dupRedactTimeout)
		_, err := a.cli.RedactEvent(ctx, room, ev, mautrix.ReqRedact{
			TxnID:  txnID("redact\x00" + string(room) + "\x00" + string(ev)),
			Reason: "duplicate of " + kept,
		})
		cancel()
		if err != nil {
			a.log.Warn("could not redact a duplicate the homeserver made of the bot's message", "room", room, "event", ev, "err", err)
			continue
		}
		a.log.Info("redacted a duplicate the homeserver made of the bot's message", "room", room, "event", ev, "kept", kept)
	}
}

// sawOwn records the bot's own event from a sync and redacts the
// duplicate it reveals, if any.
func (a *Adapter) sawOwn(ctx context.Context, room id.RoomID, ev *event.Event) {
	if ev.Sender != a.cli.UserID {
		return
	}
	if dups := a.echo.saw(room, ev); len(dups) > 0 {
		a.redactDuplicates(ctx, room, a.echo.keptOf(ev.Unsigned.TransactionID), dups)
	}
}

// keptOf is the event kept under txn, for the redaction's reason.
func (e *echoes) keptOf(txn string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if r := e.m[txn]; r != nil {
		if r.kept != "" {
			return string(r.kept)
		}
		if len(r.seen) > 0 {
			return string(r.seen[0])
		}
	}
	return ""
}
