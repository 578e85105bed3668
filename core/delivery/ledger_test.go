package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Outboxes sharing a pacing ledger, as instances sharing a store do: each
// has its own fake platform (its own connection), and one in-memory ledger
// keeps the shared count, on the bubble's fake clock, so every wait is
// checked to the instant.

// memLedger is core.PaceLedger in memory, by the documented contract.
type memLedger struct {
	mu      sync.Mutex
	takes   map[string][]time.Time
	paused  map[string]time.Time
	err     error // every call fails with it while set
	calls   int
	refused int
	pauses  []string // PausePace's keys, in calls' order
}

func newMemLedger() *memLedger {
	return &memLedger{takes: map[string][]time.Time{}, paused: map[string]time.Time{}}
}

func (l *memLedger) TakePace(ctx context.Context, windows []core.PaceWindow, pauses []string) (core.PaceTake, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	if l.err != nil {
		return core.PaceTake{}, l.err
	}
	if _, ok := ctx.Deadline(); !ok {
		return core.PaceTake{}, errors.New("memLedger: a call without a deadline")
	}
	now := time.Now()
	var take core.PaceTake
	for _, w := range windows {
		var kept []time.Time
		for _, t := range l.takes[w.Key] {
			if t.After(now.Add(-w.Rate.Per)) {
				kept = append(kept, t)
			}
		}
		l.takes[w.Key] = kept
		if len(kept) >= w.Rate.N {
			take.Holds = append(take.Holds, core.PaceHold{Key: w.Key, Wait: kept[len(kept)-w.Rate.N].Add(w.Rate.Per).Sub(now)})
		}
	}
	for _, k := range pauses {
		if until := l.paused[k]; until.After(now) {
			take.Holds = append(take.Holds, core.PaceHold{Key: k, Wait: until.Sub(now)})
		}
	}
	if len(take.Holds) > 0 {
		l.refused++
		return take, nil
	}
	for _, w := range windows {
		l.takes[w.Key] = append(l.takes[w.Key], now)
	}
	take.At = now
	return take, nil
}

func (l *memLedger) PausePace(ctx context.Context, keys []string, d time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	until := time.Now().Add(d)
	for _, k := range keys {
		l.pauses = append(l.pauses, k)
		if until.After(l.paused[k]) {
			l.paused[k] = until
		}
	}
	return nil
}

func (l *memLedger) set(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
}

func (l *memLedger) counts() (calls, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls, l.refused
}

// peer is one instance: an outbox with its own fake platform, on the ledger.
type peer struct {
	a *fake.Adapter
	o *delivery.Outbox
}

func newPeer(l core.PaceLedger, caps core.Capabilities, log *slog.Logger) peer {
	a := newFake(caps)
	opts := delivery.OutboxOptions{Ledger: l, Logger: log}
	return peer{a: a, o: newOutbox(a, opts)}
}

// sends queues n sends at place through in, each recording its outcome.
func (in peer) sends(r *recorder, place core.Place, names ...string) {
	for _, n := range names {
		in.o.Enqueue(r.op(in.a, core.OpSend, "", place, n))
	}
}

// sentAt lists when in's platform took each send, as offsets from start.
func sentAt(a *fake.Adapter, start time.Time) []time.Duration {
	var out []time.Duration
	for _, op := range a.Ops() {
		if op.Method == "send" && op.Err == nil {
			out = append(out, op.Time.Sub(start))
		}
	}
	return out
}

func durations(ds ...time.Duration) string { return fmt.Sprint(ds) }

var groupBudget = limits(core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 5, Per: time.Second}})

// TestOutboxWaitsForTheSharedWindow: another instance spent the group's
// budget at 0; this one, whose own window is empty, asks the ledger, is
// refused, and waits exactly until the other's slots leave the window —
// holding its other ops to that group back too, without asking again.
func TestOutboxWaitsForTheSharedWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		l := newMemLedger()
		a := newPeer(l, groupBudget, nil)
		defer a.o.Close()
		b := newPeer(l, groupBudget, nil)
		defer b.o.Close()
		r := newRecorder()
		a.sends(r, core.Place{Chat: "group", Thread: "1"}, "a1", "a2", "a3", "a4", "a5")
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		b.sends(r, core.Place{Chat: "group", Thread: "2"}, "b1")
		b.sends(r, core.Place{Chat: "group", Thread: "3"}, "b2", "b3")
		drain(t, a.o)
		drain(t, b.o)
		synctest.Wait()
		if got, want := durations(sentAt(a.a, start)...), durations(0, 0, 0, 0, 0); got != want {
			t.Errorf("a sent at %s, want %s", got, want)
		}
		if got, want := durations(sentAt(b.a, start)...), durations(time.Second, time.Second, time.Second); got != want {
			t.Errorf("b sent at %s, want %s (when a's slots left the shared window)", got, want)
		}
		// a's five takes; b1 and b2, started together at 100 ms, each
		// refused; then b's three. b3 waited behind b2 (one op at a
		// time per place) and then behind the held window: not asked.
		if calls, refused := l.counts(); calls != 10 || refused != 2 {
			t.Errorf("the ledger was asked %d times and refused %d, want 10 and 2", calls, refused)
		}
		for _, n := range []string{"a1", "a5", "b1", "b3"} {
			if err, ok := r.outcome(n); !ok || err != nil {
				t.Errorf("%s ended with %v (done %t), want success", n, err, ok)
			}
		}
	})
}

// TestOutboxKeepsSharedSlotsForSends: a window that keeps a share for new
// messages (2 of 5) keeps it across instances: another instance's sends
// took the 3 slots edits may use, so this instance's edit waits for them
// to leave the window, and its send does not.
func TestOutboxKeepsSharedSlotsForSends(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit core.Limit
	}{
		// Two of five kept, as the limit declares.
		{"declared share", core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 5, Per: time.Second}, SendShare: 0.4}},
		// A limit that keeps none still keeps a quarter in the ledger,
		// since instances cannot order each other's queues: one of four.
		{"default share", core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 4, Per: time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				caps := limits(tc.limit)
				l := newMemLedger()
				a := newPeer(l, caps, nil)
				defer a.o.Close()
				b := newPeer(l, caps, nil)
				defer b.o.Close()
				r := newRecorder()
				for i := range 3 {
					a.o.Enqueue(r.op(a.a, core.OpSend, "", core.Place{Chat: "group", Thread: fmt.Sprint(i)}, fmt.Sprint("a", i)))
				}
				synctest.Wait()
				time.Sleep(100 * time.Millisecond)
				b.o.Enqueue(r.op(b.a, core.OpEdit, "", core.Place{Chat: "group", Thread: "x"}, "b edit"))
				synctest.Wait()
				b.o.Enqueue(r.op(b.a, core.OpSend, "", core.Place{Chat: "group", Thread: "y"}, "b send"))
				drain(t, a.o)
				drain(t, b.o)
				synctest.Wait()
				var got []string
				for _, op := range b.a.Ops() {
					got = append(got, fmt.Sprint(op.Text, "@", op.Time.Sub(start)))
				}
				if want := []string{"b send@100ms", "b edit@1s"}; !slices.Equal(got, want) {
					t.Errorf("b's platform saw %v, want %v", got, want)
				}
			})
		})
	}
}

// TestOutboxSharesAPlatformsPause: a 429 at one instance is written to the
// ledger; the other instance, which never met it, learns it on its next
// take and holds everything to that group back until it ends — to the
// millisecond, and asking the ledger once.
func TestOutboxSharesAPlatformsPause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		l := newMemLedger()
		a := newPeer(l, groupBudget, nil)
		defer a.o.Close()
		b := newPeer(l, groupBudget, nil)
		defer b.o.Close()
		a.a.FailNext("send", &core.RateLimitError{RetryAfter: 2 * time.Second, Scope: core.ScopeGroup})
		r := newRecorder()
		a.sends(r, core.Place{Chat: "group", Thread: "1"}, "a1")
		synctest.Wait()
		time.Sleep(500 * time.Millisecond)
		b.sends(r, core.Place{Chat: "group", Thread: "2"}, "b1")
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		b.sends(r, core.Place{Chat: "group", Thread: "3"}, "b2")
		b.sends(r, core.Place{Chat: "other"}, "elsewhere")
		drain(t, a.o)
		drain(t, b.o)
		synctest.Wait()
		if got, want := durations(sentAt(a.a, start)...), durations(2*time.Second); got != want {
			t.Errorf("a sent at %s, want %s (its own retry_after)", got, want)
		}
		var got []string
		for _, op := range b.a.Ops() {
			got = append(got, fmt.Sprint(op.Text, "@", op.Time.Sub(start)))
		}
		slices.Sort(got) // b1 and b2 run at the same instant
		if want := []string{"b1@2s", "b2@2s", "elsewhere@600ms"}; !slices.Equal(got, want) {
			t.Errorf("b's platform saw %v, want %v", got, want)
		}
		l.mu.Lock()
		pauses := len(l.pauses)
		l.mu.Unlock()
		if pauses != 1 {
			t.Errorf("%d pauses written, want the group's one", pauses)
		}
		// a: the refused send and its retry; b: b1 refused, elsewhere,
		// then b1 and b2.
		if calls, refused := l.counts(); calls != 6 || refused != 1 {
			t.Errorf("the ledger was asked %d times and refused %d, want 6 and 1", calls, refused)
		}
	})
}

// TestOutboxPacesAloneWhileTheLedgerFails: a ledger that fails costs no
// delivery: the op goes by the local windows, the outbox says so once,
// leaves the ledger alone for 5 s, asks again, and says when it is back.
func TestOutboxPacesAloneWhileTheLedgerFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		logs := &logRecorder{watch: []string{
			"shared pacing unavailable: pacing by this instance's own count until the database answers",
			"shared pacing is back: rate budgets are counted with the other instances again"}}
		l := newMemLedger()
		l.set(errors.New("connection refused"))
		a := newPeer(l, groupBudget, slog.New(logs))
		defer a.o.Close()
		r := newRecorder()
		place := core.Place{Chat: "group"}
		a.sends(r, place, "0s")
		synctest.Wait()
		time.Sleep(time.Second)
		a.sends(r, place, "1s") // within 5 s of the failure: not asked
		synctest.Wait()
		time.Sleep(5 * time.Second)
		a.sends(r, place, "6s") // asked again: still failing
		synctest.Wait()
		l.set(nil)
		time.Sleep(2 * time.Second)
		a.sends(r, place, "8s") // within 5 s of the last failure
		synctest.Wait()
		time.Sleep(4 * time.Second)
		a.sends(r, place, "12s") // asked, and it answers
		drain(t, a.o)
		synctest.Wait()
		want := durations(0, time.Second, 6*time.Second, 8*time.Second, 12*time.Second)
		if got := durations(sentAt(a.a, start)...); got != want {
			t.Errorf("sent at %s, want %s: every op at once", got, want)
		}
		if calls, _ := l.counts(); calls != 3 {
			t.Errorf("the ledger was asked %d times, want 3 (at 0, 6 and 12 s)", calls)
		}
		wantLogs := []string{
			"WARN shared pacing unavailable: pacing by this instance's own count until the database answers retry_in=5s",
			"INFO shared pacing is back: rate budgets are counted with the other instances again"}
		if got := logs.got(); !slices.Equal(got, wantLogs) {
			t.Errorf("logged %q, want %q", got, wantLogs)
		}
	})
}

// TestTakeMethodShared: calls of a limited method count across instances.
// A call the ledger refuses is not counted here either, and this
// instance's next call waits for the shared window (a methodLead shorter,
// as locally), without asking the ledger in between.
func TestTakeMethodShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		caps := limits(core.Limit{Scope: core.ScopeAccount, Methods: []string{"chat.update"}, Rate: core.Rate{N: 2, Per: time.Second}})
		l := newMemLedger()
		a := newPeer(l, caps, nil)
		defer a.o.Close()
		b := newPeer(l, caps, nil)
		defer b.o.Close()
		place := core.Place{Chat: "c"}
		for i := range 2 {
			if w := a.o.TakeMethod("fake", place, "chat.update"); w != 0 {
				t.Fatalf("a's call %d waits %s, want none", i, w)
			}
		}
		time.Sleep(200 * time.Millisecond)
		if w := b.o.TakeMethod("fake", place, "chat.update"); w != 750*time.Millisecond {
			t.Errorf("b's call waits %s, want 750ms (until a's calls leave the shared 950ms window)", w)
		}
		time.Sleep(100 * time.Millisecond)
		if w := b.o.TakeMethod("fake", place, "chat.update"); w != 650*time.Millisecond {
			t.Errorf("b's next call waits %s, want 650ms, told by its own count", w)
		}
		time.Sleep(650 * time.Millisecond)
		if w := b.o.TakeMethod("fake", place, "chat.update"); w != 0 {
			t.Errorf("b's call at 950ms waits %s, want none", w)
		}
		if w := b.o.TakeMethod("fake", place, "chat.update"); w != 0 {
			t.Errorf("b's second call at 950ms waits %s, want none: its refused call was not counted", w)
		}
		if calls, refused := l.counts(); calls != 5 || refused != 1 {
			t.Errorf("the ledger was asked %d times and refused %d, want 5 and 1", calls, refused)
		}
		if w := b.o.TakeMethod("fake", place, "other"); w != 0 {
			t.Errorf("a method no limit names waits %s", w)
		}
	})
}

// TestOutboxLeavesUnpacedPlatformsOutOfTheLedger: a platform that declares
// no limits (the web page) is not paced, here or with the others: its ops
// cost no round trip, and its rate limits stay this instance's.
func TestOutboxLeavesUnpacedPlatformsOutOfTheLedger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := newMemLedger()
		a := newPeer(l, core.Capabilities{}, nil)
		defer a.o.Close()
		a.a.FailNext("send", &core.RateLimitError{RetryAfter: time.Second})
		r := newRecorder()
		a.sends(r, core.Place{Chat: "page"}, "one", "two")
		drain(t, a.o)
		synctest.Wait()
		if calls, _ := l.counts(); calls != 0 || len(l.pauses) != 0 {
			t.Errorf("the ledger was asked %d times and told of %d pauses, want none", calls, len(l.pauses))
		}
		if got := len(sentAt(a.a, time.Time{})); got != 2 {
			t.Errorf("%d sends reached the platform, want 2", got)
		}
	})
}

// TestOutboxRefusedRunKeepsItsTurn: a run the ledger refused served
// nobody, so its conversation keeps its turn among the group's: with one
// slot a second, the op refused first goes first when the slot frees.
func TestOutboxRefusedRunKeepsItsTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		one := limits(core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 1, Per: time.Second}})
		l := newMemLedger()
		a := newPeer(l, one, nil)
		defer a.o.Close()
		b := newPeer(l, one, nil)
		defer b.o.Close()
		r := newRecorder()
		a.sends(r, core.Place{Chat: "group", Thread: "a"}, "a")
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		b.sends(r, core.Place{Chat: "group", Thread: "1"}, "first")
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		b.sends(r, core.Place{Chat: "group", Thread: "2"}, "second")
		drain(t, a.o)
		drain(t, b.o)
		synctest.Wait()
		var got []string
		for _, op := range b.a.Ops() {
			got = append(got, fmt.Sprint(op.Text, "@", op.Time.Sub(start)))
		}
		if want := []string{"first@1s", "second@2s"}; !slices.Equal(got, want) {
			t.Errorf("b's platform saw %v, want %v", got, want)
		}
	})
}

// refusingLedger refuses every take, once release is closed.
type refusingLedger struct {
	entered chan struct{}
	release chan struct{}
}

func (l refusingLedger) TakePace(ctx context.Context, windows []core.PaceWindow, _ []string) (core.PaceTake, error) {
	l.entered <- struct{}{}
	<-l.release
	return core.PaceTake{Holds: []core.PaceHold{{Key: windows[0].Key, Wait: time.Second}}}, nil
}

func (refusingLedger) PausePace(context.Context, []string, time.Duration) error { return nil }

// TestOutboxClosedDuringARefusedTake: an op whose take the ledger refuses
// while the outbox closes ends with ErrOutboxClosed, like the rest of the
// queue, rather than going back into a queue nobody runs any more.
func TestOutboxClosedDuringARefusedTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := refusingLedger{entered: make(chan struct{}, 1), release: make(chan struct{})}
		a := newPeer(l, groupBudget, nil)
		r := newRecorder()
		a.sends(r, core.Place{Chat: "group"}, "refused")
		<-l.entered
		closed := make(chan struct{})
		go func() {
			a.o.Close()
			close(closed)
		}()
		synctest.Wait() // Close waits for the run in the ledger
		close(l.release)
		<-closed
		synctest.Wait()
		if err, ok := r.outcome("refused"); !ok || !errors.Is(err, core.ErrOutboxClosed) {
			t.Errorf("the op ended with %v (done %t), want ErrOutboxClosed", err, ok)
		}
	})
}
