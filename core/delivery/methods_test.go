package delivery_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// A method's window is a sliding window like any other: Slack's 20
// chat.startStream calls a minute fit in one burst, the 21st waits exactly
// until the first leaves the window (less the 50 ms a call may come
// early), and one slot frees one call. A method no limit names is never
// held back.
func TestOutboxMethodWindowExactWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{Limits: []core.Limit{
			{Scope: core.ScopeAccount, Methods: []string{"chat.startStream"}, Rate: core.Rate{N: 20, Per: time.Minute}},
		}})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		p := core.Place{Chat: "C1", Thread: "1"}
		for i := range 20 {
			if w := o.TakeMethod(a.Name(), p, "chat.startStream"); w != 0 {
				t.Fatalf("call %d: wait %v, want none", i+1, w)
			}
			time.Sleep(time.Second)
		}
		if w := o.TakeMethod(a.Name(), core.Place{Chat: "C2", Thread: "9"}, "chat.startStream"); w != 39950*time.Millisecond {
			t.Fatalf("21st call within the minute, elsewhere in the workspace: wait %v, want 39.95s", w)
		}
		if w := o.TakeMethod(a.Name(), p, "chat.appendStream"); w != 0 {
			t.Fatalf("a method no limit names: wait %v, want none", w)
		}
		time.Sleep(39950 * time.Millisecond)
		if w := o.TakeMethod(a.Name(), p, "chat.startStream"); w != 0 {
			t.Fatalf("once the first left the window: wait %v, want none", w)
		}
		if w := o.TakeMethod(a.Name(), p, "chat.startStream"); w != time.Second {
			t.Fatalf("a second call where one left: wait %v, want 1s (the second call's slot)", w)
		}
	})
}

// A call must have room in every window naming its method; refused, it
// counts in none of them.
func TestOutboxMethodTakesAllOrNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{Limits: []core.Limit{
			{Scope: core.ScopeAccount, Methods: []string{"x", "y"}, Rate: core.Rate{N: 2, Per: time.Minute}},
			{Scope: core.ScopeAccount, Methods: []string{"x"}, Rate: core.Rate{N: 1, Per: time.Minute}},
		}})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		p := core.Place{Chat: "C1"}
		for i, step := range []struct {
			method string
			want   time.Duration
		}{
			{"x", 0},
			{"x", time.Minute - 50*time.Millisecond}, // its own window is full
			{"y", 0},                                 // the refused x took no slot of the shared window
			{"y", time.Minute - 50*time.Millisecond},
		} {
			if w := o.TakeMethod(a.Name(), p, step.method); w != step.want {
				t.Fatalf("step %d, %s: wait %v, want %v", i+1, step.method, w, step.want)
			}
		}
	})
}

// Windows on methods and windows on kinds count apart: operations never
// take a method's slots nor wait for them, and calls take no slot of a
// kind's window.
func TestOutboxMethodAndKindWindowsApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{Limits: []core.Limit{
			{Scope: core.ScopeGroup, Kinds: []core.OpKind{core.OpSend}, Rate: core.Rate{N: 2, Per: time.Minute}},
			{Scope: core.ScopeGroup, Methods: []string{"post"}, Rate: core.Rate{N: 2, Per: time.Minute}},
		}})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		p := core.Place{Chat: "C1", Thread: "1"}
		r := newRecorder()
		start := time.Now()
		o.Enqueue(r.op(a, core.OpSend, "", p, "A"))
		drain(t, o)
		for i := range 2 {
			if w := o.TakeMethod(a.Name(), p, "post"); w != 0 {
				t.Fatalf("call %d after an op: wait %v, want none (ops take no method's slot)", i+1, w)
			}
		}
		if w := o.TakeMethod(a.Name(), core.Place{Chat: "C1", Thread: "2"}, "post"); w != time.Minute-50*time.Millisecond {
			t.Fatalf("third call in the channel: wait %v, want 59.95s", w)
		}
		o.Enqueue(r.op(a, core.OpSend, "", p, "B"))
		o.Enqueue(r.op(a, core.OpSend, "", p, "C"))
		drain(t, o)
		want := map[string]time.Duration{"A": 0, "B": 0, "C": time.Minute}
		for _, op := range a.Ops() {
			if got := op.Time.Sub(start); got != want[op.Text] {
				t.Errorf("%s sent at +%v, want +%v (a full method window holds no op back)", op.Text, got, want[op.Text])
			}
		}
	})
}

// A rate limit pauses calls as it pauses operations: a whole scope's pause
// holds back every call in it, to the millisecond; a pause of some kinds
// holds back only operations of those kinds (which then make no call). A
// method no limit names is not paced, pauses included.
func TestOutboxMethodTakesWaitForPauses(t *testing.T) {
	topic1 := core.Place{Chat: "group", Thread: "1"}
	topic2 := core.Place{Chat: "group", Thread: "2"}
	other := core.Place{Chat: "other"}
	const retryAfter = 2 * time.Second
	for _, tc := range []struct {
		name   string
		rl     core.RateLimitError
		paused map[core.Place]bool
	}{
		{"conversation", core.RateLimitError{Scope: core.ScopeConversation}, map[core.Place]bool{topic1: true}},
		{"unspecified", core.RateLimitError{}, map[core.Place]bool{topic1: true, topic2: true}},
		{"group", core.RateLimitError{Scope: core.ScopeGroup}, map[core.Place]bool{topic1: true, topic2: true}},
		{"account", core.RateLimitError{Scope: core.ScopeAccount}, map[core.Place]bool{topic1: true, topic2: true, other: true}},
		{"account edits", core.RateLimitError{Scope: core.ScopeAccount, Kinds: []core.OpKind{core.OpEdit}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := newFake(core.Capabilities{Limits: []core.Limit{
					{Scope: core.ScopeAccount, Methods: []string{"post"}, Rate: core.Rate{N: 100, Per: time.Minute}},
				}})
				o := newOutbox(a, delivery.OutboxOptions{})
				defer o.Close()
				rl := tc.rl
				rl.RetryAfter = retryAfter
				a.FailNext("send", &rl)
				r := newRecorder()
				o.Enqueue(r.op(a, core.OpEdit, "out", topic1, "refused"))
				synctest.Wait() // the refused attempt; the op waits for the pause
				for _, p := range []core.Place{topic1, topic2, other} {
					want := time.Duration(0)
					if tc.paused[p] {
						want = retryAfter
					}
					if w := o.TakeMethod(a.Name(), p, "post"); w != want {
						t.Errorf("call at %+v: wait %v, want %v", p, w, want)
					}
					if w := o.TakeMethod(a.Name(), p, "unpaced"); w != 0 {
						t.Errorf("a method no limit names, at %+v: wait %v, want none", p, w)
					}
				}
				drain(t, o)
			})
		})
	}
}

// A place not yet known (the zero Place) spends only the account's
// budgets, as an operation there does.
func TestOutboxMethodAtZeroPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{Limits: []core.Limit{
			{Scope: core.ScopeGroup, Methods: []string{"post"}, Rate: core.Rate{N: 1, Per: time.Second}},
			{Scope: core.ScopeAccount, Methods: []string{"post"}, Rate: core.Rate{N: 2, Per: time.Minute}},
		}})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		for i, want := range []time.Duration{0, 0, time.Minute - 50*time.Millisecond} {
			if w := o.TakeMethod(a.Name(), core.Place{}, "post"); w != want {
				t.Fatalf("call %d: wait %v, want %v", i+1, w, want)
			}
		}
	})
}
