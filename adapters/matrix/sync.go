package matrix

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// Cursors the sync loop keeps.
const (
	cursorSince  = "matrix.next_batch"
	cursorFilter = "matrix.filter"
)

// position is a stored cursor tied to the account it belongs to: a token
// of another account (the configuration changed) is not reused.
type position struct {
	UserID id.UserID `json:"user_id"`
	Value  string    `json:"value"`
	// Version of the filter definition, so a changed filter is created
	// anew rather than reused.
	Version int `json:"version,omitempty"`
}

// filterVersion changes whenever syncFilter does.
const filterVersion = 1

// backfillMax bounds the events fetched to close one room's gap after a
// long absence.
const backfillMax = 1000

// syncFilter keeps the sync to what the adapter reads: room messages,
// reactions, redactions and the state it acts on, without presence,
// typing, receipts or account data.
func syncFilter() *mautrix.Filter {
	none := &mautrix.FilterPart{NotTypes: []event.Type{{Type: "*"}}}
	return &mautrix.Filter{
		AccountData: none,
		Presence:    none,
		Room: &mautrix.RoomFilter{
			AccountData: none,
			Ephemeral:   none,
			State:       &mautrix.FilterPart{LazyLoadMembers: true},
			Timeline: &mautrix.FilterPart{Limit: 100, LazyLoadMembers: true, Types: []event.Type{
				event.EventMessage, event.EventReaction, event.EventEncrypted, event.StateMember,
				event.StatePowerLevels, event.StateEncryption,
			}},
		},
	}
}

// Run implements core.Adapter: it long-polls /sync and hands every event
// to h in order.
//
// The sync position (next_batch) is stored only after every event of the
// batch was dealt with (its command durably appended, or refused for good),
// so a crash makes the homeserver send the batch again and the commands'
// dedup key (the event id) drops what was already stored. Messages sent
// while parley was down come in the first sync after it starts; a room
// whose timeline the homeserver cut short (limited) is backfilled with
// /messages from where the previous sync ended. The very first sync of an
// account (no stored position) takes no old messages, only invites: the
// history of rooms the bot was already in is not parley's to answer.
//
// The homeserver would serve several syncs of one account, but each would
// hand every event to its own instance: among instances sharing the store
// only the holder of the lease "matrix/<user id>" syncs (core.Lead). It
// reads the position once it holds the lease and writes the position and
// the filter fenced by it, so a holder that lost the lease moves nothing;
// the next holder starts from the last position stored and the event ids
// drop what is handed twice.
func (a *Adapter) Run(ctx context.Context, h core.Handler) error {
	if !a.ready.Load() {
		if err := a.Check(ctx); err != nil {
			return err
		}
	}
	return core.Lead(ctx, standby{a.opts.Leases, a.echo}, LeaseName(a.opts.UserID), core.HoldOptions{Logger: a.log}, func(held *core.Held) error {
		return a.sync(held, h)
	})
}

// LeaseName is the lease whose holder syncs for the account user.
func LeaseName(user id.UserID) string { return "matrix/" + string(user) }

// standby is the adapter's leases as Run holds the sync's: an attempt that
// is not granted (another instance syncs) lets keyed sends go without
// waiting for a first sync this instance does not make (see
// waitFirstSync); sync arms the wait again once the lease is held.
type standby struct {
	core.Leaser
	echo *echoes
}

func (s standby) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	l, granted, err := s.Leaser.AcquireLease(ctx, name, ttl)
	if err == nil && !granted {
		s.echo.armed.Store(false)
	}
	return l, granted, err
}

// sync long-polls /sync while held is held. It returns nil when held's
// context ends, an error wrapping core.ErrLeaseLost when a fenced write was
// refused, and what ends Run otherwise.
func (a *Adapter) sync(held *core.Held, h core.Handler) error {
	ctx := held.Context()
	a.echo.runBegan()
	since, err := a.loadPosition(ctx, cursorSince, 0)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	filter := ""
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		if backoff > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
		}
		if filter == "" {
			if filter, err = a.filter(ctx, held); err != nil {
				if errors.Is(err, core.ErrLeaseLost) {
					return err
				}
				backoff = nextBackoff(backoff, err)
				a.log.Warn("create the sync filter", "err", err, "retry_in", backoff)
				continue
			}
		}
		// The first sync since the start does not wait for news: keyed
		// sends wait for it (see waitFirstSync), and from a stored
		// position it already holds what happened while parley was down.
		timeout := a.opts.SyncTimeout
		if !a.echo.isSynced() {
			timeout = 0
		}
		tok := *a.token.Load()
		resp, err := a.cli.SyncRequest(ctx, int(timeout/time.Millisecond), since, filter, false, event.PresenceOffline)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, mautrix.MUnknownToken) && a.opts.AccessToken == "" {
				// The password's login was logged out (or expired): log
				// in again; the configured password is still good.
				if lerr := a.login(ctx, tok); lerr != nil {
					a.log.Error("log in again after the homeserver forgot the token", "err", lerr)
				}
			}
			if errors.Is(err, mautrix.MInvalidParam) || errors.Is(err, mautrix.MBadJSON) {
				// The stored filter is unknown to the homeserver (it
				// was reset): make a new one.
				filter = ""
				if err := a.opts.Leases.SetCursorFenced(ctx, cursorFilter, "", held.Lease()); errors.Is(err, core.ErrLeaseLost) {
					return fmt.Errorf("matrix: forget the sync filter: %w", err)
				}
			}
			backoff = nextBackoff(backoff, err)
			a.log.Warn("sync", "err", err, "retry_in", backoff)
			continue
		}
		backoff = 0
		if err := a.process(ctx, h, resp, since); err != nil {
			return nil // ctx ended; the batch comes again
		}
		a.echo.firstSynced()
		if resp.NextBatch != "" && resp.NextBatch != since {
			since = resp.NextBatch
			// The batch is handled: its position is stored even when a
			// stop came meanwhile (the lease is kept until sync
			// returns), or the next start hands it again.
			save, cancel := context.WithTimeout(context.WithoutCancel(ctx), positionSaveTimeout)
			err := a.savePosition(save, held, cursorSince, since, 0)
			cancel()
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// positionSaveTimeout bounds the storing of a handled batch's position
// once parley is stopping.
const positionSaveTimeout = 5 * time.Second

// nextBackoff is how long to wait after err: what a 429 asks, else
// doubling from a second up to 30 seconds.
func nextBackoff(prev time.Duration, err error) time.Duration {
	var rl *core.RateLimitError
	if errors.As(classify("sync", opOther, err, false), &rl) {
		return rl.RetryAfter
	}
	return min(max(2*prev, time.Second), 30*time.Second)
}

// filter returns the stored filter id, or uploads syncFilter and stores
// its id.
func (a *Adapter) filter(ctx context.Context, held *core.Held) (string, error) {
	if f, err := a.loadPosition(ctx, cursorFilter, filterVersion); err != nil || f != "" {
		return f, err
	}
	resp, err := a.cli.CreateFilter(ctx, syncFilter())
	if err != nil {
		return "", err
	}
	if err := a.savePosition(ctx, held, cursorFilter, resp.FilterID, filterVersion); err != nil {
		return "", err
	}
	return resp.FilterID, nil
}

func (a *Adapter) loadPosition(ctx context.Context, name string, version int) (string, error) {
	v, err := a.opts.Cursors.Cursor(ctx, name)
	if err != nil {
		return "", fmt.Errorf("matrix: read %s: %w", name, err)
	}
	var p position
	if v == "" || json.Unmarshal([]byte(v), &p) != nil || p.UserID != a.opts.UserID || p.Version != version {
		return "", nil
	}
	return p.Value, nil
}

// savePosition stores a cursor under held's lease, retrying while the
// store fails until it is stored or ctx ends: a position not stored only
// means a batch handled again. It returns an error wrapping
// core.ErrLeaseLost when the store refused the write: another instance
// syncs now, from the position it reads itself.
func (a *Adapter) savePosition(ctx context.Context, held *core.Held, name, value string, version int) error {
	b, _ := json.Marshal(position{UserID: a.opts.UserID, Value: value, Version: version})
	for ctx.Err() == nil {
		err := a.opts.Leases.SetCursorFenced(ctx, name, string(b), held.Lease())
		if err == nil {
			return nil
		}
		if errors.Is(err, core.ErrLeaseLost) {
			return fmt.Errorf("matrix: save %s: %w", name, err)
		}
		a.log.Error("save the sync position", "cursor", name, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// process deals with one sync response, room by room in a fixed order; it
// returns an error only when ctx ended first.
func (a *Adapter) process(ctx context.Context, h core.Handler, resp *mautrix.RespSync, since string) error {
	first := since == ""
	for _, room := range sortedKeys(resp.Rooms.Leave) {
		a.power.Delete(room)
		a.log.Info("the bot is no longer in a room; its session gets a new room on the next delivery", "room", room)
	}
	for _, room := range sortedKeys(resp.Rooms.Invite) {
		if err := a.retry(ctx, "invite", func(ctx context.Context) error { return a.onInvite(ctx, h, room, resp.Rooms.Invite[room].State.Events) }); err != nil {
			return err
		}
	}
	for _, room := range sortedKeys(resp.Rooms.Join) {
		jr := resp.Rooms.Join[room]
		for _, ev := range jr.State.Events {
			a.onState(room, ev)
		}
		if first {
			for _, ev := range jr.Timeline.Events {
				a.onState(room, ev)
				a.sawOwn(ctx, room, ev)
			}
			continue
		}
		events := jr.Timeline.Events
		if jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			events = append(a.backfill(ctx, room, jr.Timeline.PrevBatch, since), events...)
		}
		for _, ev := range events {
			ev.RoomID = room
			a.sawOwn(ctx, room, ev)
			if err := a.retry(ctx, "event", func(ctx context.Context) error { return a.onEvent(ctx, h, ev) }); err != nil {
				return err
			}
		}
	}
	return nil
}

// backfill fetches the events between the previous sync and the start of
// a cut-short timeline, oldest first. A failure is logged: what it could
// not fetch is lost to parley, as it would be to any client.
func (a *Adapter) backfill(ctx context.Context, room id.RoomID, from, since string) []*event.Event {
	var got []*event.Event
	for len(got) < backfillMax {
		page, err := a.cli.Messages(ctx, room, from, since, mautrix.DirectionBackward, syncFilter().Room.Timeline, 100)
		if err != nil {
			a.log.Warn("could not fetch the messages of a gap in a room's timeline", "room", room, "err", err)
			break
		}
		got = append(got, page.Chunk...)
		if page.End == "" || len(page.Chunk) == 0 {
			break
		}
		from = page.End
	}
	if len(got) >= backfillMax {
		a.log.Warn("a room's gap holds more events than parley fetches; the oldest are skipped", "room", room, "fetched", len(got))
	}
	slices.Reverse(got)
	return got
}

// retry runs f until it succeeds or ctx ends: a command that is not stored
// yet is not skipped. Each try is bounded by eventTimeout. An error marked
// permanent (the homeserver refused something for good) ends it too:
// retrying cannot change it, and the events after it must not wait
// forever.
func (a *Adapter) retry(ctx context.Context, what string, f func(ctx context.Context) error) error {
	r := inbound.Retry{Log: a.log, What: "sync " + what, Attempt: eventTimeout, SkipPermanent: true}
	return r.Do(ctx, f)
}

// onState follows the state the adapter caches: power levels.
func (a *Adapter) onState(room id.RoomID, ev *event.Event) {
	if ev.Type == event.StatePowerLevels {
		a.power.Delete(room)
	}
}

func sortedKeys[V any](m map[id.RoomID]V) []id.RoomID {
	keys := make([]id.RoomID, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
