// Package cleanup keeps parley's chats tidy with a persisted pending-deletion
// ledger. Every message parley sends or receives on a platform gets a
// lifetime (core.Lifetime):
//
//	next_notice    feedback and notices: deleted by the next notice in the
//	               same session and binding, or when output streaming starts
//	next_input     the person's own input: deleted by their next input in
//	               the session
//	turn_complete  progress messages: deleted when the agent's turn completes
//	manual         assistant messages, the output message, files: never
//
// Rows live in the store (core.Store's ledger). When a rule fires, its rows
// are first marked due in the store and only then handed to the owning
// adapter's lane of the outbox for deletion; a row is removed once the
// message is deleted or found already gone. Replay, run at start-up,
// re-issues the deletions that were due when the daemon stopped. Instances
// sharing a store share the due deletions through claims with an expiry
// (claims.go): each one is carried out by one instance, and what a stopped
// or dead instance left is taken up by a periodic scan on every instance,
// not only at start-up. A rule the
// adapter cannot carry out (it is no Deleter, or the message is a person's
// and the platform does not let bots delete those) is skipped and its row
// dropped: never faked.
package cleanup

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Deleter deletes platform messages (delivery.Dispatcher implements it through
// the outbox). done receives nil when the message is deleted or already
// gone, an error wrapping core.ErrUnsupported when the adapter cannot delete.
type Deleter interface {
	EnqueueDelete(ref core.MessageRef, done func(error))
}

// Options configure a Ledger.
type Options struct {
	// Disabled lifetimes are never deleted; their rows are not kept.
	Disabled map[core.Lifetime]bool
	// Capabilities returns an adapter's capabilities and whether it can
	// delete at all.
	Capabilities func(core.AdapterName) (caps core.Capabilities, canDelete bool)
	Now          func() time.Time
	Logger       *slog.Logger
	// Claims share the due deletions with the other instances of the
	// store; the zero value keeps them all this instance's.
	Claims ClaimOptions
}

// Ledger applies the cleanup rules.
type Ledger struct {
	store core.Store
	del   Deleter
	opts  Options
	log   *slog.Logger
	seen  atomic.Uint64
	// stopping is set once Run ended: scans take nothing more.
	stopping atomic.Bool

	deleted, failed atomic.Uint64

	mu sync.Mutex
	// fired is, per session and lifetime, the seq of the last event that
	// fired the lifetime's rule. A message recorded after its rule fired
	// (a notice still on its way when output started) is deleted at once.
	// It is kept for the firedSessions sessions whose rules fired last
	// (see noteFired).
	fired map[core.SessionID]map[core.Lifetime]uint64
	// flights are the deletions handed to the outbox and not finished,
	// by refKey: their claims are renewed, and a scan does not enqueue
	// them again. abandoned are those the closing outbox dropped, left
	// due for another instance or the next start (Stop).
	flights   map[string]*flight
	abandoned map[string]core.MessageRef
}

// firedSessions is how many sessions' last firings the ledger remembers at
// least; it forgets the older ones once it holds twice as many. A firing
// only matters to a message that was on its way while it happened, and
// such a message is recorded within the outbox's retries, long before
// thousands of other sessions have had a rule fire since. Were one recorded
// later still, its row would wait for its session's next firing instead of
// being deleted at once. Unbounded, the map kept an entry for every session
// ever written to: 34 MiB after 100,000 sessions.
const firedSessions = 4096

// New returns a Ledger.
func New(store core.Store, del Deleter, opts Options) *Ledger {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Capabilities == nil {
		opts.Capabilities = func(core.AdapterName) (core.Capabilities, bool) { return core.Capabilities{}, false }
	}
	if opts.Claims.Store != nil {
		opts.Claims = opts.Claims.withDefaults()
	}
	return &Ledger{store: store, del: del, opts: opts, log: opts.Logger, fired: map[core.SessionID]map[core.Lifetime]uint64{},
		flights: map[string]*flight{}, abandoned: map[string]core.MessageRef{}}
}

// Run applies the rules events fire until ctx ends.
func (l *Ledger) Run(ctx context.Context, sub *core.Subscription) {
	core.Consume(ctx, sub, func(ctx context.Context, e core.Event) {
		if err := l.Apply(ctx, e); err != nil {
			l.log.Error("cleanup", "kind", e.Kind, "session", e.Session, "err", err)
		}
		if e.Seq > 0 {
			l.seen.Store(e.Seq)
		}
	})
	// The daemon is stopping: deletions other instances left are theirs
	// to take now, not this draining outbox's.
	l.stopping.Store(true)
}

// Stats returns how many messages the ledger deleted and how many
// deletions failed (and stay due: for the next start-up, or with claims
// for the next scan once their claim expired). Deletions a stopping
// daemon abandoned are no failures.
func (l *Ledger) Stats() (deleted, failed uint64) { return l.deleted.Load(), l.failed.Load() }

// Seen is the Seq of the last logged event Run applied.
func (l *Ledger) Seen() uint64 { return l.seen.Load() }

// Apply fires the rules one event triggers.
func (l *Ledger) Apply(ctx context.Context, e core.Event) error {
	switch e.Kind {
	case core.EventHumanMessage, core.EventAnswer, core.EventCancel:
		l.noteFired(e, core.LifetimeNextInput)
	case core.EventOutput:
		l.noteFired(e, core.LifetimeNextNotice)
	case core.EventTurnComplete:
		l.noteFired(e, core.LifetimeTurnComplete)
	case core.EventSessionUpdated:
		if e.Status == core.StatusClosed {
			l.mu.Lock()
			delete(l.fired, e.Session)
			l.mu.Unlock()
		}
	}
	switch e.Kind {
	case core.EventHumanMessage, core.EventAnswer, core.EventCancel:
		var keep core.MessageRef
		if e.Message != nil {
			keep = e.Message.Ref
		}
		return l.fire(ctx, e.Session, func(r core.CleanupEntry) bool {
			return r.Lifetime == core.LifetimeNextInput && !sameRef(r.Ref, keep)
		})
	case core.EventOutput:
		return l.fire(ctx, e.Session, func(r core.CleanupEntry) bool { return r.Lifetime == core.LifetimeNextNotice })
	case core.EventTurnComplete:
		return l.fire(ctx, e.Session, func(r core.CleanupEntry) bool { return r.Lifetime == core.LifetimeTurnComplete })
	}
	return nil
}

// Sent records a message parley put on a platform; a notice also fires the
// next_notice rule for the same session and binding.
func (l *Ledger) Sent(ctx context.Context, s delivery.Sent) {
	if s.Lifetime == "" || s.Lifetime == core.LifetimeManual || s.Ref.IsZero() {
		return
	}
	if s.Kind == core.KindNotice {
		err := l.fire(ctx, s.Session, func(r core.CleanupEntry) bool {
			return r.Lifetime == core.LifetimeNextNotice && r.Ref.Adapter == s.Ref.Adapter
		})
		if err != nil {
			l.log.Error("cleanup: previous notices", "session", s.Session, "err", err)
		}
	}
	if l.opts.Disabled[s.Lifetime] {
		return
	}
	row := core.CleanupEntry{Session: s.Session, Ref: s.Ref, Lifetime: s.Lifetime, Created: l.opts.Now()}
	l.mu.Lock()
	row.Due = l.firedAfter(s.Session, s.Lifetime, s.Seq)
	l.mu.Unlock()
	if row.Due && l.canDelete(row) {
		mine, err := l.markDue(ctx, []core.CleanupEntry{row})
		if err != nil {
			l.log.Error("cleanup: record", "session", s.Session, "err", err)
			return
		}
		l.delete(ctx, mine)
		return
	}
	if err := l.store.AddCleanup(ctx, row); err != nil {
		l.log.Error("cleanup: record", "session", s.Session, "err", err)
		return
	}
	if row.Due {
		if err := l.store.RemoveCleanup(ctx, row.Ref); err != nil {
			l.log.Error("cleanup: remove row", "err", err)
		}
	}
}

func (l *Ledger) noteFired(e core.Event, lt core.Lifetime) {
	if e.Seq == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.fired[e.Session]
	if m == nil {
		m = map[core.Lifetime]uint64{}
		l.fired[e.Session] = m
	}
	m[lt] = max(m[lt], e.Seq)
	if len(l.fired) > 2*firedSessions {
		l.forgetOldFirings()
	}
}

// firedAfter reports whether lt's rule fired for session after the event
// seq. l.mu is held.
func (l *Ledger) firedAfter(session core.SessionID, lt core.Lifetime, seq uint64) bool {
	return seq > 0 && l.fired[session][lt] > seq
}

// forgetOldFirings keeps the firedSessions sessions whose rules fired last.
// It runs once per firedSessions new sessions, so its sort costs a few
// comparisons per firing. l.mu is held.
func (l *Ledger) forgetOldFirings() {
	last := make([]uint64, 0, len(l.fired))
	for _, m := range l.fired {
		last = append(last, slices.Max(slices.Collect(maps.Values(m))))
	}
	slices.Sort(last)
	keep := last[len(last)-firedSessions]
	for id, m := range l.fired {
		if slices.Max(slices.Collect(maps.Values(m))) < keep {
			delete(l.fired, id)
		}
	}
}

// Replay re-issues the deletions that were due when the daemon stopped.
// With claims it takes only the due rows nobody holds (a scan), never
// those another live instance is carrying out.
func (l *Ledger) Replay(ctx context.Context) error {
	if l.opts.Claims.Store != nil {
		n, err := l.takeFree(ctx)
		if err != nil {
			return err
		}
		l.log.Info("cleanup: replaying pending deletions", "rows", n)
		return nil
	}
	rows, err := l.store.Cleanup(ctx, "")
	if err != nil {
		return err
	}
	var due []core.CleanupEntry
	for _, r := range rows {
		if r.Due {
			due = append(due, r)
		}
	}
	l.log.Info("cleanup: replaying pending deletions", "rows", len(due))
	l.delete(ctx, due)
	return nil
}

// fire marks the session's rows that match as due, durably, and deletes them.
func (l *Ledger) fire(ctx context.Context, session core.SessionID, match func(core.CleanupEntry) bool) error {
	rows, err := l.store.Cleanup(ctx, session)
	if err != nil {
		return err
	}
	var due, drop []core.CleanupEntry
	for _, r := range rows {
		if !match(r) {
			continue
		}
		if l.opts.Disabled[r.Lifetime] || !l.canDelete(r) {
			drop = append(drop, r)
			continue
		}
		if !r.Due {
			r.Due = true
			due = append(due, r)
		}
	}
	if len(drop) > 0 {
		l.log.Debug("cleanup: skipping rows the adapter cannot delete or that are disabled", "rows", len(drop))
		if err := l.store.RemoveCleanup(ctx, refs(drop)...); err != nil {
			return err
		}
	}
	if len(due) == 0 {
		return nil
	}
	mine, err := l.markDue(ctx, due)
	if err != nil {
		return err
	}
	l.delete(ctx, mine)
	return nil
}

func (l *Ledger) canDelete(r core.CleanupEntry) bool {
	caps, ok := l.opts.Capabilities(r.Ref.Adapter)
	return ok && (!r.Others || caps.DeleteOthers)
}

func (l *Ledger) delete(ctx context.Context, rows []core.CleanupEntry) {
	for _, r := range rows {
		key := refKey(r.Ref)
		l.mu.Lock()
		f := l.flights[key]
		if f == nil {
			f = &flight{ref: r.Ref}
			l.flights[key] = f
		}
		f.n++
		l.mu.Unlock()
		l.del.EnqueueDelete(r.Ref, func(err error) {
			l.landed(key, err)
			switch {
			case err == nil, errors.Is(err, core.ErrMessageGone), errors.Is(err, core.ErrUnsupported),
				core.IsPermanent(err):
				if err == nil {
					l.deleted.Add(1)
				} else if core.IsPermanent(err) && !errors.Is(err, core.ErrUnsupported) {
					// Refused for good (too old, no right): retrying at
					// every start cannot help, so the row goes too.
					l.failed.Add(1)
					l.log.Warn("cleanup: the platform refused a deletion for good; not retrying",
						"adapter", r.Ref.Adapter, "err", err)
				}
				if err := l.store.RemoveCleanup(context.WithoutCancel(ctx), r.Ref); err != nil {
					l.log.Error("cleanup: remove row", "err", err)
				}
			case errors.Is(err, core.ErrSuperseded):
				// The same deletion was asked again; that one reports.
			case errors.Is(err, core.ErrOutboxClosed):
				// The daemon is stopping: still due, and Stop says how
				// many were left.
			default:
				// Kept (still due): the next start-up replays it, or
				// with claims the next scan once its claim expired.
				l.failed.Add(1)
				l.log.Warn("cleanup: delete failed", "adapter", r.Ref.Adapter, "err", err)
			}
		})
	}
}

// landed notes that one enqueueing of the deletion key ended with err.
func (l *Ledger) landed(key string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f := l.flights[key]
	if f == nil {
		return
	}
	if errors.Is(err, core.ErrOutboxClosed) {
		l.abandoned[key] = f.ref
	}
	if f.n--; f.n <= 0 {
		delete(l.flights, key)
	}
}

func refs(rows []core.CleanupEntry) []core.MessageRef {
	out := make([]core.MessageRef, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Ref)
	}
	return slices.Clip(out)
}

func sameRef(a, b core.MessageRef) bool {
	return a.ID != "" && a.ID == b.ID && a.Place == b.Place && (a.Adapter == b.Adapter || a.Adapter == "" || b.Adapter == "")
}
