package delivery_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// timedOps records when each op ran, in the synctest bubble's time.
type timedOps struct {
	mu    sync.Mutex
	start time.Time
	ran   []string
	at    map[string]time.Duration
}

func (r *timedOps) op(a core.AdapterName, kind core.OpKind, place core.Place, name string) core.Op {
	return core.Op{Kind: kind, Adapter: a, Place: place, Run: func(context.Context, core.Place) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.ran = append(r.ran, name)
		r.at[name] = time.Since(r.start)
		return nil
	}}
}

// TestOutboxExpect: while a conversation expects its turn's first message,
// its deletions and renames wait for it, then take the next slots of a
// budget of one call a second; without a message they go at the deadline;
// an ended expectation releases them at once; a turn expects once; other
// conversations and sends are not held.
func TestOutboxExpect(t *testing.T) {
	limit := limits(core.Limit{Scope: core.ScopeGroup, Rate: core.Rate{N: 1, Per: time.Second}})
	chat, other := core.Place{Chat: "g", Thread: "1"}, core.Place{Chat: "h", Thread: "1"}
	run := func(t *testing.T, f func(o *delivery.Outbox, r *timedOps, a core.AdapterName)) {
		synctest.Test(t, func(t *testing.T) {
			a := newFake(limit)
			o := newOutbox(a, delivery.OutboxOptions{})
			defer o.Close()
			r := &timedOps{start: time.Now(), at: map[string]time.Duration{}}
			f(o, r, a.Name())
		})
	}

	t.Run("the first message goes first", func(t *testing.T) {
		run(t, func(o *delivery.Outbox, r *timedOps, a core.AdapterName) {
			o.Expect(a, chat, "turn 1", time.Now().Add(10*time.Second))
			o.Enqueue(r.op(a, core.OpRename, chat, "rename"))
			o.Enqueue(r.op(a, core.OpDelete, chat, "delete"))
			o.Enqueue(r.op(a, core.OpDelete, other, "elsewhere"))
			time.Sleep(300 * time.Millisecond) // the agent's first text
			o.Enqueue(r.op(a, core.OpSend, chat, "answer"))
			drain(t, o)
			if want := []string{"elsewhere", "answer", "delete", "rename"}; !slices.Equal(r.ran, want) {
				t.Fatalf("ran %q, want %q", r.ran, want)
			}
			want := map[string]time.Duration{"elsewhere": 0, "answer": 300 * time.Millisecond,
				"delete": 1300 * time.Millisecond, "rename": 2300 * time.Millisecond}
			for name, at := range want {
				if r.at[name] != at {
					t.Errorf("%s ran at %v, want %v", name, r.at[name], at)
				}
			}
		})
	})
	t.Run("no message: the deadline", func(t *testing.T) {
		run(t, func(o *delivery.Outbox, r *timedOps, a core.AdapterName) {
			o.Expect(a, chat, "turn 1", time.Now().Add(10*time.Second))
			o.Enqueue(r.op(a, core.OpDelete, chat, "delete"))
			drain(t, o)
			if r.at["delete"] != 10*time.Second {
				t.Fatalf("the delete ran at %v, want at the deadline", r.at["delete"])
			}
		})
	})
	t.Run("the turn ends", func(t *testing.T) {
		run(t, func(o *delivery.Outbox, r *timedOps, a core.AdapterName) {
			o.Expect(a, chat, "turn 1", time.Now().Add(10*time.Second))
			o.Enqueue(r.op(a, core.OpDelete, chat, "delete"))
			time.Sleep(2 * time.Second)
			o.Expect(a, chat, "", time.Time{})
			drain(t, o)
			if r.at["delete"] != 2*time.Second {
				t.Fatalf("the delete ran at %v, want when the turn ended", r.at["delete"])
			}
		})
	})
	t.Run("a turn expects once", func(t *testing.T) {
		run(t, func(o *delivery.Outbox, r *timedOps, a core.AdapterName) {
			o.Expect(a, chat, "turn 1", time.Now().Add(10*time.Second))
			o.Enqueue(r.op(a, core.OpSend, chat, "answer"))
			drain(t, o)
			// The same turn's status changes again (a title): its
			// rename is not held a second time.
			o.Expect(a, chat, "turn 1", time.Now().Add(10*time.Second))
			time.Sleep(time.Second)
			o.Enqueue(r.op(a, core.OpRename, chat, "rename"))
			drain(t, o)
			if r.at["rename"] != time.Second {
				t.Fatalf("the rename ran at %v, want at once", r.at["rename"])
			}
		})
	})
}
