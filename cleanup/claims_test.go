package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// sharedLedger models a store's ledger shared by several instances, with
// claims that expire by the clock (the fake one inside a synctest
// bubble): what core.CleanupClaimer promises.
type sharedLedger struct {
	core.Store // only the ledger's methods are used

	mu     sync.Mutex
	rows   map[string]*sharedRow
	order  []string // insertion order, for oldest first
	renews map[string][]time.Duration
	start  time.Time
}

type sharedRow struct {
	e     core.CleanupEntry
	by    string
	until time.Time
}

func newSharedLedger() *sharedLedger {
	return &sharedLedger{rows: map[string]*sharedRow{}, renews: map[string][]time.Duration{}, start: time.Now()}
}

func (s *sharedLedger) put(e core.CleanupEntry) *sharedRow {
	k := refKey(e.Ref)
	r := s.rows[k]
	if r == nil {
		r = &sharedRow{}
		s.rows[k] = r
		s.order = append(s.order, k)
	}
	r.e = e
	return r
}

func (s *sharedLedger) free(r *sharedRow, instance string) bool {
	return r.by == "" || r.by == instance || !r.until.After(time.Now())
}

func (s *sharedLedger) AddCleanup(ctx context.Context, rows ...core.CleanupEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range rows {
		s.put(e)
	}
	return nil
}

func (s *sharedLedger) Cleanup(ctx context.Context, session core.SessionID) ([]core.CleanupEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []core.CleanupEntry
	for _, k := range s.order {
		if r := s.rows[k]; r != nil && (session == "" || r.e.Session == session) {
			out = append(out, r.e)
		}
	}
	return out, nil
}

func (s *sharedLedger) RemoveCleanup(ctx context.Context, refs ...core.MessageRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range refs {
		delete(s.rows, refKey(ref))
	}
	return nil
}

func (s *sharedLedger) ClaimDueCleanup(ctx context.Context, instance string, ttl time.Duration, rows ...core.CleanupEntry) ([]core.MessageRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []core.MessageRef
	for _, e := range rows {
		if r := s.rows[refKey(e.Ref)]; r != nil && !s.free(r, instance) {
			continue
		}
		e.Due = true
		r := s.put(e)
		r.by, r.until = instance, time.Now().Add(ttl)
		out = append(out, e.Ref)
	}
	return out, nil
}

func (s *sharedLedger) ClaimPendingCleanup(ctx context.Context, instance string, limit int, ttl time.Duration) ([]core.CleanupEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []core.CleanupEntry
	for _, k := range s.order {
		r := s.rows[k]
		if r == nil || !r.e.Due || !(r.by == "" || !r.until.After(time.Now())) {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		r.by, r.until = instance, time.Now().Add(ttl)
		out = append(out, r.e)
	}
	return out, nil
}

func (s *sharedLedger) RenewCleanupClaims(ctx context.Context, instance string, refs []core.MessageRef, ttl time.Duration) ([]core.MessageRef, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renews[instance] = append(s.renews[instance], time.Since(s.start))
	var out []core.MessageRef
	for _, ref := range refs {
		if r := s.rows[refKey(ref)]; r != nil && r.by == instance {
			r.until = time.Now().Add(ttl)
			out = append(out, ref)
		}
	}
	return out, nil
}

func (s *sharedLedger) ReleaseCleanupClaims(ctx context.Context, instance string, refs []core.MessageRef) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ref := range refs {
		if r := s.rows[refKey(ref)]; r != nil && r.by == instance {
			r.by, r.until = "", time.Time{}
		}
	}
	return nil
}

func (s *sharedLedger) renewsOf(instance string) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.renews[instance])
}

// platform models the platform's deletions behind an outbox that holds
// them (pacing) until told to finish them.
type platform struct {
	start time.Time

	mu      sync.Mutex
	calls   []deleteCall
	pending []func(error)
}

type deleteCall struct {
	ref core.MessageRef
	at  time.Duration
}

func (p *platform) EnqueueDelete(ref core.MessageRef, done func(error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, deleteCall{ref, time.Since(p.start)})
	p.pending = append(p.pending, done)
}

// finish ends every pending deletion with err.
func (p *platform) finish(err error) {
	p.mu.Lock()
	pending := p.pending
	p.pending = nil
	p.mu.Unlock()
	for _, done := range pending {
		done(err)
	}
}

func (p *platform) issued() []deleteCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.calls)
}

// records keeps a ledger's log.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// lines returns the messages logged at level or above, with their count
// attribute when they have one.
func (r *records) lines(level slog.Level) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.recs {
		if rec.Level < level {
			continue
		}
		line := rec.Message
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key == "count" {
				line += " count=" + a.Value.String()
			}
			return true
		})
		out = append(out, line)
	}
	return out
}

func deletable(core.AdapterName) (core.Capabilities, bool) { return core.Capabilities{}, true }

// instance is one parley instance's ledger on the shared store.
type instance struct {
	l    *Ledger
	p    *platform
	log  *records
	stop context.CancelFunc
	done chan struct{}
}

func startInstance(st *sharedLedger, name string, claims bool) *instance {
	in := &instance{p: &platform{start: st.start}, log: &records{}, done: make(chan struct{})}
	opts := Options{Capabilities: deletable, Logger: slog.New(in.log)}
	if claims {
		opts.Claims = ClaimOptions{Store: st, Instance: core.InstanceID(name)}
	}
	in.l = New(st, in.p, opts)
	ctx, cancel := context.WithCancel(context.Background())
	in.stop = cancel
	go func() { defer close(in.done); in.l.RunClaims(ctx) }()
	return in
}

// halt stops the instance's claim loop (a kill: nothing released).
func (in *instance) halt() {
	in.stop()
	<-in.done
}

var ref1 = core.MessageRef{Adapter: "telegram", Place: core.Place{Chat: "-100", Thread: "7"}, ID: "41"}

// A deletion one instance marked due is renewed every 2 s while it waits
// in its outbox, and the other instance's scans (every 2 s) leave it
// alone. Killed at 6.5 s (its last renewal at 6 s), the holder's claim
// expires at 12 s: the other's scan at exactly 12 s takes it over and
// issues it, once.
func TestClaimsRenewScanAndTakeoverTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newSharedLedger()
		a, b := startInstance(st, "a", true), startInstance(st, "b", true)
		// A notice recorded after its next_notice rule fired is due at
		// once: a marks it due and holds it.
		a.l.Apply(ctx, core.Event{Kind: core.EventOutput, Session: "s", Seq: 5})
		a.l.Sent(ctx, sentNotice(ref1, 4))
		if got := a.p.issued(); len(got) != 1 || got[0].at != 0 {
			t.Fatalf("a issued %v, want its deletion at once", got)
		}
		time.Sleep(6500 * time.Millisecond)
		synctest.Wait()
		if got, want := st.renewsOf("a"), []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("a renewed at %v, want %v", got, want)
		}
		if got := b.p.issued(); len(got) != 0 {
			t.Errorf("b issued %v while a held the deletion", got)
		}
		a.halt()
		time.Sleep(5500*time.Millisecond - time.Nanosecond) // to just before 12 s
		synctest.Wait()
		if got := b.p.issued(); len(got) != 0 {
			t.Errorf("b issued %v before a's claim expired at 12 s", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got, want := b.p.issued(), []deleteCall{{ref1, 12 * time.Second}}; !slices.Equal(got, want) {
			t.Errorf("b issued %v, want the abandoned deletion once at 12 s", got)
		}
		// b holds it now: its own later scans do not issue it again.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := b.p.issued(); len(got) != 1 {
			t.Errorf("b issued %v, want the deletion once", got)
		}
		b.p.finish(nil)
		if rows, _ := st.Cleanup(ctx, ""); len(rows) != 0 {
			t.Errorf("ledger after b deleted: %v", rows)
		}
		b.halt()
	})
}

func sentNotice(ref core.MessageRef, seq uint64) delivery.Sent {
	return delivery.Sent{Session: "s", Ref: ref, Kind: core.KindNotice, Lifetime: core.LifetimeNextNotice, Seq: seq}
}

// A clean stop: the outbox drops the pending deletions (ErrOutboxClosed),
// which is no failure and logs no warning each; Stop releases them with
// one line, and the other instance's next scan, 2 s later, takes them at
// once rather than at the claims' expiry.
func TestStopReleasesToTheNextScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newSharedLedger()
		var due []core.CleanupEntry
		for i := range 300 {
			ref := ref1
			ref.ID = strings.Repeat("9", i+1)
			due = append(due, core.CleanupEntry{Session: "s", Ref: ref, Lifetime: core.LifetimeTurnComplete, Due: true})
		}
		storeMust(t, st.AddCleanup(ctx, due...))
		a := startInstance(st, "a", true)
		storeMust(t, a.l.Replay(ctx))
		if n := len(a.p.issued()); n != 300 {
			t.Fatalf("a's start-up took %d deletions, want 300", n)
		}
		b := startInstance(st, "b", true)
		storeMust(t, b.l.Replay(ctx))
		if n := len(b.p.issued()); n != 0 {
			t.Fatalf("b's start-up re-issued %d deletions a holds", n)
		}
		time.Sleep(time.Second)
		// a stops cleanly at 1 s: its outbox is closed, then the ledger.
		a.halt()
		a.p.finish(core.ErrOutboxClosed)
		a.l.Stop(ctx)
		if got := a.log.lines(slog.LevelInfo); !slices.Equal(got, []string{
			"cleanup: replaying pending deletions",
			"cleanup: stopped with deletions pending; released to the other instances count=300",
		}) {
			t.Errorf("a logged %q", got)
		}
		if _, failed := a.l.Stats(); failed != 0 {
			t.Errorf("a counted %d failures for deletions dropped by its stop", failed)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		calls := b.p.issued()
		if len(calls) != 300 || calls[0].at != 2*time.Second || calls[299].at != 2*time.Second {
			t.Errorf("b issued %d deletions (first %v); want the 300 released, at its scan at 2 s", len(calls), calls[:min(1, len(calls))])
		}
		b.p.finish(nil)
		if deleted, _ := b.l.Stats(); deleted != 300 {
			t.Errorf("b deleted %d, want 300", deleted)
		}
		b.halt()
	})
}

// Without claims (one instance on bbolt) a stop with deletions pending
// logs one line, warns about none and counts no failure; the rows stay due
// for the next start-up's Replay.
func TestStopWithoutClaims(t *testing.T) {
	ctx := context.Background()
	st := newSharedLedger()
	var due []core.CleanupEntry
	for i := range 5 {
		ref := ref1
		ref.ID = strings.Repeat("9", i+1)
		due = append(due, core.CleanupEntry{Session: "s", Ref: ref, Lifetime: core.LifetimeTurnComplete, Due: true})
	}
	storeMust(t, st.AddCleanup(ctx, due...))
	a := startInstance(st, "a", false)
	storeMust(t, a.l.Replay(ctx))
	a.halt()
	a.p.finish(fmt.Errorf("%w: %w", core.ErrOutboxClosed, context.Canceled))
	a.l.Stop(ctx)
	if got := a.log.lines(slog.LevelInfo); !slices.Equal(got, []string{
		"cleanup: replaying pending deletions",
		"cleanup: stopped with deletions pending; the next start replays them count=5",
	}) {
		t.Errorf("logged %q", got)
	}
	if _, failed := a.l.Stats(); failed != 0 {
		t.Errorf("%d failures counted", failed)
	}
	again := startInstance(st, "a", false)
	storeMust(t, again.l.Replay(ctx))
	if n := len(again.p.issued()); n != 5 {
		t.Errorf("the next start replayed %d deletions, want 5", n)
	}
	again.halt()
}

// A deletion that failed is no longer renewed: its claim expires and a
// scan (here the same instance's) takes it up again, TTL later.
func TestFailedDeletionRetriedAfterExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newSharedLedger()
		a := startInstance(st, "a", true)
		a.l.Apply(ctx, core.Event{Kind: core.EventOutput, Session: "s", Seq: 5})
		a.l.Sent(ctx, sentNotice(ref1, 4))
		time.Sleep(time.Second)
		a.p.finish(errors.New("platform down"))
		time.Sleep(5 * time.Second) // the claim taken at 0 expires at 6 s, the scan at 6 s finds it
		synctest.Wait()
		if got, want := a.p.issued(), []deleteCall{{ref1, 0}, {ref1, 6 * time.Second}}; !slices.Equal(got, want) {
			t.Errorf("issued %v, want %v", got, want)
		}
		a.halt()
	})
}

func storeMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Once Run ended (the daemon stops and drains its outbox) the scans take
// nothing more, and the claims held are still renewed.
func TestNoScanWhileStopping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := newSharedLedger()
		a := startInstance(st, "a", true)
		a.l.Apply(ctx, core.Event{Kind: core.EventOutput, Session: "s", Seq: 5})
		a.l.Sent(ctx, sentNotice(ref1, 4))
		bus := core.NewMemBus(0)
		sub, cancelSub := bus.Subscribe(1, false)
		defer cancelSub()
		stopped, stop := context.WithCancel(ctx)
		stop()
		a.l.Run(stopped, sub)
		other := ref1
		other.ID = "42"
		storeMust(t, st.AddCleanup(ctx, core.CleanupEntry{Session: "s", Ref: other, Lifetime: core.LifetimeTurnComplete, Due: true}))
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if got := a.p.issued(); len(got) != 1 || got[0].ref != ref1 {
			t.Errorf("issued %v while stopping, want only the deletion from before", got)
		}
		if got, want := st.renewsOf("a"), []time.Duration{2 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
			t.Errorf("renewed at %v while stopping, want %v", got, want)
		}
		a.halt()
	})
}
