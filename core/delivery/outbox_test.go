package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// The outbox's tests run in synctest bubbles: time is fake and advances
// only when every goroutine is blocked, so pacing, pauses and backoff are
// checked to the exact instant, in milliseconds of real time.

// newOutbox starts an outbox for a inside the current bubble; the caller
// closes it before the bubble ends.
func newOutbox(a core.Adapter, opts delivery.OutboxOptions) *delivery.Outbox {
	if opts.Jitter == nil {
		opts.Jitter = func() float64 { return 0 }
	}
	return delivery.NewOutbox(opts, a)
}

// newFake is a fake platform with no tolerance for early calls: on a fake
// clock there is no scheduling jitter to absorb.
func newFake(caps core.Capabilities) *fake.Adapter {
	a := fake.New("fake", caps)
	a.Slack = 0
	return a
}

func drain(t *testing.T, o *delivery.Outbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := o.Drain(ctx); err != nil {
		t.Fatalf("outbox did not drain: %v", err)
	}
}

// recorder remembers the order ops ran in and their outcomes.
type recorder struct {
	mu   sync.Mutex
	ran  []string
	done map[string]error
}

func newRecorder() *recorder { return &recorder{done: map[string]error{}} }

// op sends text at place through a, recording the run and the outcome.
func (r *recorder) op(a *fake.Adapter, kind core.OpKind, key string, place core.Place, text string) core.Op {
	return core.Op{Kind: kind, Adapter: a.Name(), Place: place, Key: key,
		Run: func(ctx context.Context, _ core.Place) error {
			r.mu.Lock()
			r.ran = append(r.ran, text)
			r.mu.Unlock()
			_, err := a.Send(ctx, place, core.OutMessage{Text: text})
			return err
		},
		Done: func(err error) {
			r.mu.Lock()
			r.done[text] = err
			r.mu.Unlock()
		}}
}

func (r *recorder) outcome(text string) (error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err, ok := r.done[text]
	return err, ok
}

func limits(l ...core.Limit) core.Capabilities { return core.Capabilities{Limits: l} }

func TestOutboxPriorityAndCoalescing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeAccount, Rate: core.Rate{N: 1, Per: time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		place := core.Place{Chat: "c"}
		r := newRecorder()
		// The first op takes the budget; everything after it waits and is
		// then ordered by priority, with same-key edits coalesced.
		o.Enqueue(r.op(a, core.OpSend, "", place, "first"))
		o.Enqueue(r.op(a, core.OpTyping, "", place, "typing"))
		o.Enqueue(r.op(a, core.OpEdit, "out", place, "edit 1"))
		o.Enqueue(r.op(a, core.OpRename, "", place, "rename"))
		o.Enqueue(r.op(a, core.OpDelete, "", place, "delete"))
		o.Enqueue(r.op(a, core.OpEdit, "out", place, "edit 2"))
		o.Enqueue(r.op(a, core.OpSend, "", place, "send"))
		o.Enqueue(r.op(a, core.OpEdit, "out", place, "edit 3"))
		drain(t, o)
		synctest.Wait()
		want := []string{"first", "send", "delete", "edit 3", "rename", "typing"}
		if fmt.Sprint(r.ran) != fmt.Sprint(want) {
			t.Errorf("ran %v, want %v", r.ran, want)
		}
		for _, old := range []string{"edit 1", "edit 2"} {
			if err, _ := r.outcome(old); !errors.Is(err, core.ErrSuperseded) {
				t.Errorf("%s ended with %v, want ErrSuperseded", old, err)
			}
		}
	})
}

// TestOutboxPausesExactlyTheScope: a 429 names a scope, and only that scope
// waits for its retry_after — to the millisecond.
func TestOutboxPausesExactlyTheScope(t *testing.T) {
	topic1 := core.Place{Chat: "group", Thread: "1"}
	topic2 := core.Place{Chat: "group", Thread: "2"}
	other := core.Place{Chat: "other"}
	for _, tc := range []struct {
		scope core.Scope
		// paused says which places wait for the retry_after.
		paused map[core.Place]bool
	}{
		{core.ScopeConversation, map[core.Place]bool{topic1: true}},
		{core.ScopeUnspecified, map[core.Place]bool{topic1: true, topic2: true}},
		{core.ScopeGroup, map[core.Place]bool{topic1: true, topic2: true}},
		{core.ScopeAccount, map[core.Place]bool{topic1: true, topic2: true, other: true}},
	} {
		t.Run(tc.scope.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newFake(core.Capabilities{})
				o := newOutbox(a, delivery.OutboxOptions{})
				defer o.Close()
				const retryAfter = 2 * time.Second
				a.FailNext("send", &core.RateLimitError{RetryAfter: retryAfter, Scope: tc.scope})
				r := newRecorder()
				start := time.Now()
				o.Enqueue(r.op(a, core.OpSend, "out", topic1, "v1"))
				synctest.Wait() // the refused attempt
				o.Enqueue(r.op(a, core.OpSend, "out", topic1, "v2"))
				o.Enqueue(r.op(a, core.OpSend, "", topic2, "same group"))
				o.Enqueue(r.op(a, core.OpSend, "", other, "other group"))
				drain(t, o)
				for _, op := range a.Ops()[1:] {
					if op.Err != nil {
						t.Fatalf("%q refused: %v", op.Text, op.Err)
					}
					want := time.Duration(0)
					if tc.paused[op.Place] {
						want = retryAfter
					}
					if got := op.Time.Sub(start); got != want {
						t.Errorf("%q sent at +%s, want +%s", op.Text, got, want)
					}
					if op.Text == "v1" {
						t.Errorf("superseded content v1 was sent")
					}
				}
			})
		})
	}
}

// TestOutboxNeverGivesUpOnTransientFailures: an op failing for a 30-second
// outage is retried with doubling backoff (1, 2, 4, 8, 16 s, …, capped) and
// lands at the first attempt after the outage.
func TestOutboxNeverGivesUpOnTransientFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{MaxBackoff: 10 * time.Second})
		defer o.Close()
		for range 6 {
			a.FailNext("send", errors.New("502 Bad Gateway"))
		}
		r := newRecorder()
		start := time.Now()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "answer"))
		drain(t, o)
		synctest.Wait()
		var at []time.Duration
		for _, op := range a.Ops() {
			at = append(at, op.Time.Sub(start))
		}
		// Waits 1, 2, 4, 8, then the 10 s cap twice.
		want := []time.Duration{0, 1 * time.Second, 3 * time.Second, 7 * time.Second, 15 * time.Second, 25 * time.Second, 35 * time.Second}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Errorf("attempts at %v, want %v", at, want)
		}
		if err, ok := r.outcome("answer"); !ok || err != nil {
			t.Errorf("outcome %v (done %v), want success", err, ok)
		}
		if s := o.Stats(); s.Retries["fake"] != 6 || s.Failed["fake"] != 0 {
			t.Errorf("stats: %d retries, %d failed; want 6 and 0", s.Retries["fake"], s.Failed["fake"])
		}
	})
}

func TestOutboxJitterShortensBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{Jitter: func() float64 { return 0.5 }})
		defer o.Close()
		a.FailNext("send", errors.New("connection reset"))
		a.FailNext("send", errors.New("connection reset"))
		r := newRecorder()
		start := time.Now()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "x"))
		drain(t, o)
		ops := a.Ops()
		// 1 s less a tenth, then 2 s less a tenth.
		if got := []time.Duration{ops[1].Time.Sub(start), ops[2].Time.Sub(start)}; got[0] != 900*time.Millisecond || got[1] != 2700*time.Millisecond {
			t.Errorf("retries at %v, want [900ms 2.7s]", got)
		}
	})
}

func TestOutboxPermanentFailureEndsTheOp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		a.FailNext("send", core.Permanent(errors.New("chat not found")))
		r := newRecorder()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "x"))
		drain(t, o)
		synctest.Wait()
		if err, _ := r.outcome("x"); !core.IsPermanent(err) {
			t.Fatalf("got %v, want the permanent error", err)
		}
		if n := len(a.Ops()); n != 1 {
			t.Errorf("%d platform calls, want 1", n)
		}
		if s := o.Stats(); s.Failed["fake"] != 1 {
			t.Errorf("failed = %d, want 1", s.Failed["fake"])
		}
	})
}

// TestOutboxDeadlineFreesTheLane: a call nobody answers is cancelled at its
// deadline and retried; meanwhile other conversations are served.
func TestOutboxDeadlineFreesTheLane(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		a.FailNext("send", fake.ErrHang)
		r := newRecorder()
		start := time.Now()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "hung"))
		synctest.Wait()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "b"}, "other"))
		drain(t, o)
		var at []string
		for _, op := range a.Ops() {
			at = append(at, fmt.Sprintf("%s@%s err=%v", op.Text, op.Time.Sub(start), op.Err != nil))
		}
		timeout := delivery.DefaultTimeout(core.OpSend)
		want := []string{
			"other@0s err=false",
			fmt.Sprintf("@%s err=true", timeout), // the hung call, given up on at its deadline
			fmt.Sprintf("hung@%s err=false", timeout+time.Second),
		}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Errorf("calls %v, want %v", at, want)
		}
	})
}

// TestOutboxSpendsGroupBudgetInBursts: with Telegram's limits (1/s per
// topic, 20 a minute per group) a lone topic sends at 1/s until the group's
// 20 are spent, then waits for the oldest to leave the minute.
func TestOutboxSpendsGroupBudgetInBursts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(
			core.Limit{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}},
			core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 20, Per: time.Minute}},
		))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		start := time.Now()
		topic := core.Place{Chat: "group", Thread: "1"}
		for i := range 22 {
			o.Enqueue(r.op(a, core.OpSend, "", topic, fmt.Sprint(i)))
		}
		drain(t, o)
		ops := a.Ops()
		if len(ops) != 22 {
			t.Fatalf("%d calls, want 22 (a 429 or a retry happened)", len(ops))
		}
		for i, op := range ops {
			want := time.Duration(i) * time.Second
			if i >= 20 {
				want = time.Minute + time.Duration(i-20)*time.Second
			}
			if got := op.Time.Sub(start); got != want || op.Err != nil {
				t.Errorf("call %d at +%s (err %v), want +%s", i, got, op.Err, want)
			}
		}
	})
}

// TestOutboxSharesGroupBudgetFairly streams five topics of one group through
// a shared budget: each gets its turn, nothing exceeds the limit.
func TestOutboxSharesGroupBudgetFairly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(
			core.Limit{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}},
			core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 20, Per: time.Minute}},
		))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		for step := range 60 { // five agents stream for a minute, 10 updates a second each
			for range 10 {
				for s := range 5 {
					place := core.Place{Chat: "group", Thread: fmt.Sprint(s)}
					o.Enqueue(r.op(a, core.OpEdit, place.Thread, place, fmt.Sprintf("s%d v%d", s, step)))
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		drain(t, o)
		counts := map[string]int{}
		ops := a.Ops()
		for i, op := range ops {
			if op.Err != nil {
				t.Fatalf("platform refused an op: %v", op.Err)
			}
			if i >= 20 && op.Time.Sub(ops[i-20].Time) < time.Minute {
				t.Errorf("ops %d and %d are %s apart: 21 in a minute", i-20, i, op.Time.Sub(ops[i-20].Time))
			}
			counts[op.Place.Thread]++
		}
		// 20 in the first minute, then each topic's last text: the budget
		// shared equally, round robin.
		for s := range 5 {
			if n := counts[fmt.Sprint(s)]; n != 5 {
				t.Errorf("topic %d got %d ops: not a fair share of %v", s, n, counts)
			}
		}
	})
}

// TestOutboxTypingIsPacedAndSkipped: a typing indicator is never sent to a
// scope paused by a 429; one that cannot go before it expires is dropped.
func TestOutboxTypingIsPacedAndSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		place := core.Place{Chat: "group", Thread: "1"}
		a.FailNext("send", &core.RateLimitError{RetryAfter: 10 * time.Second})
		r := newRecorder()
		o.Enqueue(r.op(a, core.OpSend, "", place, "msg"))
		synctest.Wait()
		typing := func(text string) core.Op {
			op := r.op(a, core.OpTyping, "typing", place, text)
			op.Expires, op.BestEffort = time.Now().Add(4500*time.Millisecond), true
			return op
		}
		o.Enqueue(typing("typing 1"))
		time.Sleep(5 * time.Second)
		o.Enqueue(typing("typing 2")) // still paused until +10s: expires at +9.5s
		time.Sleep(5 * time.Second)
		o.Enqueue(typing("typing 3"))
		drain(t, o)
		synctest.Wait()
		if fmt.Sprint(r.ran) != "[msg msg typing 3]" {
			t.Errorf("ran %v, want [msg msg typing 3]", r.ran)
		}
		for _, s := range []string{"typing 1", "typing 2"} {
			if err, _ := r.outcome(s); !errors.Is(err, core.ErrExpired) {
				t.Errorf("%s: %v, want ErrExpired", s, err)
			}
		}
	})
}

// TestOutboxFlushesStalledEdit: updates faster than the edit interval
// coalesce, and the newest is shown when the interval is up although no
// further update comes.
func TestOutboxFlushesStalledEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{EditInterval: 3 * time.Second})
		o := newOutbox(a, delivery.OutboxOptions{EditInterval: time.Second})
		defer o.Close()
		r := newRecorder()
		place := core.Place{Chat: "c"}
		start := time.Now()
		for i := range 10 {
			o.Enqueue(r.op(a, core.OpEdit, "out", place, fmt.Sprint("v", i)))
			time.Sleep(100 * time.Millisecond)
		}
		drain(t, o)
		var got []string
		for _, op := range a.Ops() {
			got = append(got, fmt.Sprintf("%s@%s", op.Text, op.Time.Sub(start)))
		}
		// The adapter's own interval (3 s) wins over the default (1 s).
		if want := "[v0@0s v9@3s]"; fmt.Sprint(got) != want {
			t.Errorf("edits %v, want %s", got, want)
		}
	})
}

func TestOutboxPrunesIdlePacingState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{EditInterval: time.Second})
		defer o.Close()
		r := newRecorder()
		for i := range 100 {
			o.Enqueue(r.op(a, core.OpEdit, fmt.Sprint(i), core.Place{Chat: fmt.Sprint(i)}, "x"))
		}
		drain(t, o)
		if n := delivery.PacingEntries(o); n < 100 {
			t.Fatalf("%d pacing entries after 100 conversations, want ≥ 100", n)
		}
		time.Sleep(2 * time.Minute)
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "new"}, "wake"))
		drain(t, o)
		if n := delivery.PacingEntries(o); n > 1 {
			t.Errorf("%d pacing entries two idle minutes later, want at most the new one", n)
		}
	})
}

func TestOutboxCloseEndsPendingOps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{})
		a.FailNext("send", errors.New("503"))
		r := newRecorder()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "a"}, "x"))
		synctest.Wait()
		o.Close()
		synctest.Wait()
		if err, _ := r.outcome("x"); !errors.Is(err, core.ErrOutboxClosed) {
			t.Errorf("got %v, want ErrOutboxClosed (the journal replays it)", err)
		}
	})
}

// TestOutboxRefundsOpsThatMadeNoCall: an op that found nothing to do (the
// platform shows the text already) gives its budget back, so the next
// operation is not held back for it.
func TestOutboxRefundsOpsThatMadeNoCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: 10 * time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{EditInterval: 10 * time.Second})
		defer o.Close()
		place := core.Place{Chat: "c"}
		start := time.Now()
		var outcome error = errors.New("not done")
		o.Enqueue(core.Op{Kind: core.OpEdit, Adapter: a.Name(), Place: place, Key: "out",
			Run:  func(context.Context, core.Place) error { return core.ErrNoCall },
			Done: func(err error) { outcome = err }})
		synctest.Wait()
		r := newRecorder()
		o.Enqueue(r.op(a, core.OpEdit, "out", place, "then an edit"))
		drain(t, o)
		synctest.Wait()
		if outcome != nil {
			t.Errorf("the no-call op ended with %v, want success", outcome)
		}
		ops := a.Ops()
		if len(ops) != 1 || ops[0].Time != start {
			t.Errorf("calls %+v, want the edit at once: neither the window nor the edit interval was spent", ops)
		}
	})
}

// TestOutboxSpreadsContendedEdits: five topics stream edits into a group
// with 20 a minute. The burst goes while the budget lasts, but the last
// five slots — one per competing topic — are not burnt at once on text a
// later edit replaces: edits then go at the budget's steady rate (every
// 3 s), so each topic's newest text is still shown within seconds, not
// after the minute.
func TestOutboxSpreadsContendedEdits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(
			core.Limit{Scope: core.ScopeConversation, Rate: core.Rate{N: 1, Per: time.Second}},
			core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 20, Per: time.Minute}},
		))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		start := time.Now()
		for step := range 30 { // 3 s of streaming, 10 updates a second each
			for s := range 5 {
				place := core.Place{Chat: "group", Thread: fmt.Sprint(s)}
				o.Enqueue(r.op(a, core.OpEdit, place.Thread, place, fmt.Sprintf("s%d v%d", s, step)))
			}
			time.Sleep(100 * time.Millisecond)
		}
		drain(t, o)
		var at []time.Duration
		lastShown := map[string]time.Duration{}
		for _, op := range a.Ops() {
			if op.Err != nil {
				t.Fatalf("platform refused an op: %v", op.Err)
			}
			at = append(at, op.Time.Sub(start))
			if strings.HasSuffix(op.Text, " v29") {
				lastShown[op.Place.Thread] = op.Time.Sub(start)
			}
		}
		// Five a second for three seconds (15), then one every 3 s for
		// the topics' newest texts: the five competing topics keep the
		// budget's last five slots.
		var want []time.Duration
		for s := range 3 {
			for range 5 {
				want = append(want, time.Duration(s)*time.Second)
			}
		}
		for k := range 5 {
			want = append(want, time.Duration(5+3*k)*time.Second)
		}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Errorf("edits at %v, want %v", at, want)
		}
		for s := range 5 {
			if d, ok := lastShown[fmt.Sprint(s)]; !ok || d > 17*time.Second {
				t.Errorf("topic %d's newest text shown at +%s (shown %v), want by +17s", s, d, ok)
			}
		}
	})
}

// TestOutboxPausesOnlyTheThrottledKinds: a platform that counts methods
// separately (Slack's chat.update per workspace) names the kinds it
// throttled; sends to the same scope go on.
func TestOutboxPausesOnlyTheThrottledKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		a.FailNext("send", &core.RateLimitError{RetryAfter: 30 * time.Second, Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpEdit}})
		r := newRecorder()
		start := time.Now()
		o.Enqueue(r.op(a, core.OpEdit, "out", core.Place{Chat: "c1", Thread: "1"}, "edit"))
		synctest.Wait()
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "c2", Thread: "1"}, "send"))
		o.Enqueue(r.op(a, core.OpEdit, "other", core.Place{Chat: "c2", Thread: "2"}, "other edit"))
		drain(t, o)
		var got []string
		for _, op := range a.Ops()[1:] {
			got = append(got, fmt.Sprintf("%s@%s", op.Text, op.Time.Sub(start)))
		}
		slices.Sort(got) // the two edits go at the same instant, in either order
		if want := "[edit@30s other edit@30s send@0s]"; fmt.Sprint(got) != want {
			t.Errorf("calls %v, want %s", got, want)
		}
	})
}

// TestOutboxConversationsTakeTurns: conversations sharing a budget (one
// message a second for a whole chat) are served in turn, not first come,
// first served: the one answer of a topic enqueued after another topic's
// five messages goes second, and each topic's messages keep their order.
func TestOutboxConversationsTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 1, Per: time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		start := time.Now()
		topic := func(n string) core.Place { return core.Place{Chat: "group", Thread: n} }
		for i := range 5 {
			o.Enqueue(r.op(a, core.OpSend, "", topic("a"), fmt.Sprintf("a%d", i)))
		}
		for i := range 2 {
			o.Enqueue(r.op(a, core.OpSend, "", topic("b"), fmt.Sprintf("b%d", i)))
		}
		o.Enqueue(r.op(a, core.OpSend, "", topic("c"), "c0"))
		drain(t, o)
		var got []string
		for _, op := range a.Ops() {
			if op.Err != nil {
				t.Fatalf("platform refused %q: %v", op.Text, op.Err)
			}
			got = append(got, fmt.Sprintf("%s@+%s", op.Text, op.Time.Sub(start)))
		}
		want := []string{"a0@+0s", "b0@+1s", "c0@+2s", "a1@+3s", "b1@+4s", "a2@+5s", "a3@+6s", "a4@+7s"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sent %v, want %v", got, want)
		}
	})
}

// TestOutboxNewMessagesBeforeFinalEdits: among ops at send priority, a new
// message (a person's answer) goes before a final output edit queued at
// send priority, even one queued earlier in another conversation, so an
// answer does not wait for every session's final text when the budget
// lets out one call a second.
func TestOutboxNewMessagesBeforeFinalEdits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 1, Per: time.Second}}))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		start := time.Now()
		topic := func(n string) core.Place { return core.Place{Chat: "group", Thread: n} }
		final := func(n string) core.Op {
			op := r.op(a, core.OpSend, "", topic(n), "final "+n)
			op.Calls = []core.OpKind{core.OpEdit}
			return op
		}
		// Held while they are queued, so that the outbox chooses among
		// all four: its worker may otherwise start the first the moment
		// it is enqueued.
		o.Hold(a.Name(), true)
		o.Enqueue(final("a"))
		o.Enqueue(final("b"))
		o.Enqueue(final("c"))
		o.Enqueue(r.op(a, core.OpSend, "", topic("d"), "answer d"))
		o.Hold(a.Name(), false)
		drain(t, o)
		var got []string
		for _, op := range a.Ops() {
			got = append(got, fmt.Sprintf("%s@+%s", op.Text, op.Time.Sub(start)))
		}
		want := []string{"answer d@+0s", "final a@+1s", "final b@+2s", "final c@+3s"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("sent %v, want %v", got, want)
		}
	})
}
