package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// BenchmarkOutboxBacklog drains a backlog of 10,000 unpaced sends, one
// per conversation (a burst of sessions on a platform with no limits), as
// the outbox's scheduling costs it: the calls themselves do nothing. The backlog is queued held (Hold) and
// timed from its release.
//
//	go test -run '^$' -bench BenchmarkOutboxBacklog -benchtime 3x ./core/
func BenchmarkOutboxBacklog(b *testing.B) {
	const n = 10_000
	a := fake.New("fake", core.Capabilities{})
	run := func(context.Context, core.Place) error { return nil }
	for range b.N {
		b.StopTimer()
		out := delivery.NewOutbox(delivery.OutboxOptions{}, a)
		out.Hold("fake", true)
		for i := range n {
			out.Enqueue(core.Op{Kind: core.OpSend, Adapter: "fake", Place: core.Place{Chat: strconv.Itoa(i)}, Run: run})
		}
		b.StartTimer()
		out.Hold("fake", false)
		if err := out.Drain(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		out.Close()
	}
	b.ReportMetric(float64(n), "ops/drain")
}

// TestOutboxStartsWhatIsReadyInOrder: of the ops ready at once, those
// first by priority, then by enqueue, start while the budget lasts, in one
// dispatch; an op with an Expires that those starts push past its expiry
// is dropped at that instant, and the rest waits for the budget.
func TestOutboxStartsWhatIsReadyInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(limits(core.Limit{Scope: core.ScopeAccount, Rate: core.Rate{N: 3, Per: time.Minute}}))
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		o.Hold("fake", true)
		typing := r.op(a, core.OpTyping, "", core.Place{Chat: "t"}, "typing")
		typing.Expires = time.Now().Add(10 * time.Second)
		o.Enqueue(typing)
		o.Enqueue(r.op(a, core.OpEdit, "", core.Place{Chat: "e"}, "edit"))
		o.Enqueue(r.op(a, core.OpDelete, "", core.Place{Chat: "d"}, "delete"))
		for _, c := range []string{"a", "b", "c", "d"} {
			o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: c}, "send "+c))
		}
		ran := func() string {
			r.mu.Lock()
			defer r.mu.Unlock()
			return fmt.Sprint(slices.Sorted(slices.Values(r.ran)))
		}
		start := time.Now()
		o.Hold("fake", false)
		synctest.Wait()
		if want := "[send a send b send c]"; ran() != want {
			t.Errorf("ran %s at once, want %s", ran(), want)
		}
		if err, _ := r.outcome("typing"); !errors.Is(err, core.ErrExpired) {
			t.Errorf("typing ended with %v at once, want ErrExpired", err)
		}
		drain(t, o)
		synctest.Wait()
		if want := "[delete edit send a send b send c send d]"; ran() != want || time.Since(start) != time.Minute {
			t.Errorf("ran %s by +%s, want %s by +1m", ran(), time.Since(start), want)
		}
	})
}
