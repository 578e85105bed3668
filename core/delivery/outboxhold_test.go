package delivery_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// TestOutboxHold: a held adapter's operations wait, unattempted (so a
// refusal cannot end them), while another adapter's run; Drain does not
// wait for them; releasing runs them at once, without the backoff of
// failures from before the hold.
func TestOutboxHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down, other := newFake(core.Capabilities{}), fake.New("other", core.Capabilities{})
		o := delivery.NewOutbox(delivery.OutboxOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour, Jitter: func() float64 { return 0 }}, down, other)
		defer o.Close()
		r := newRecorder()
		place := core.Place{Chat: "c"}
		// A failure before the hold: retried after an hour's backoff.
		down.FailNext("send", errors.New("connection reset"))
		o.Enqueue(r.op(down, core.OpSend, "", place, "first"))
		synctest.Wait()
		o.Hold(down.Name(), true)
		if !o.Held(down.Name()) {
			t.Fatal("not held")
		}
		o.Enqueue(r.op(down, core.OpSend, "", place, "second"))
		o.Enqueue(r.op(other, core.OpSend, "", place, "elsewhere"))
		drain(t, o)
		synctest.Wait() // Done runs on its own goroutine
		if _, ok := r.outcome("elsewhere"); !ok {
			t.Fatal("another adapter's op did not run while one was held")
		}
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		if got := down.Messages(place); len(got) != 0 {
			t.Fatalf("held adapter was called: %v", got)
		}
		if _, ok := r.outcome("second"); ok {
			t.Fatal("a held op ended")
		}
		o.Hold(down.Name(), false)
		drain(t, o)
		synctest.Wait() // Done runs on its own goroutine
		for _, text := range []string{"first", "second"} {
			if err, ok := r.outcome(text); !ok || err != nil {
				t.Errorf("%s: done %v, %v", text, ok, err)
			}
		}
		// Released, an op backed off before the hold runs at once.
		down.FailNext("send", errors.New("connection reset"))
		o.Enqueue(r.op(down, core.OpSend, "", place, "third"))
		synctest.Wait()
		start := time.Now()
		o.Hold(down.Name(), true)
		o.Hold(down.Name(), false)
		drain(t, o)
		synctest.Wait() // Done runs on its own goroutine
		if d := time.Since(start); d != 0 {
			t.Errorf("a released op waited %v", d)
		}
		if err, ok := r.outcome("third"); !ok || err != nil {
			t.Errorf("third: done %v, %v", ok, err)
		}
	})
}

// TestOutboxHoldDrainStops: a Drain already waiting returns when the
// adapter it waits for is held.
func TestOutboxHoldDrainStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newFake(core.Capabilities{})
		o := newOutbox(a, delivery.OutboxOptions{})
		defer o.Close()
		r := newRecorder()
		a.FailNext("send", errors.New("connection reset"))
		o.Enqueue(r.op(a, core.OpSend, "", core.Place{Chat: "c"}, "x"))
		done := make(chan error)
		go func() { done <- o.Drain(context.Background()) }()
		synctest.Wait()
		o.Hold(a.Name(), true)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
