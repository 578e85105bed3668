package core_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

func recv(t *testing.T, sub *core.Subscription) core.Event {
	t.Helper()
	select {
	case e := <-sub.C:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return core.Event{}
	}
}

func TestBusDeliversInSeqOrder(t *testing.T) {
	b := core.NewMemBus(1)
	sub, cancel := b.Subscribe(16, false)
	defer cancel()
	for _, seq := range []uint64{2, 3, 1, 5, 4} {
		b.Publish(core.Event{Seq: seq})
	}
	for want := uint64(1); want <= 5; want++ {
		if got := recv(t, sub).Seq; got != want {
			t.Fatalf("got seq %d, want %d", got, want)
		}
	}
	b.Publish(core.Event{Seq: 3}) // late duplicate: dropped
	b.Publish(core.Event{Seq: 0, Kind: core.EventOutput})
	if e := recv(t, sub); e.Seq != 0 {
		t.Fatalf("got %+v, want the unlogged event", e)
	}
}

func TestBusLossySubscriberDoesNotBlock(t *testing.T) {
	b := core.NewMemBus(0)
	slow, cancelSlow := b.Subscribe(1, true)
	defer cancelSlow()
	fast, cancelFast := b.Subscribe(100, false)
	defer cancelFast()
	for seq := uint64(1); seq <= 50; seq++ {
		b.Publish(core.Event{Seq: seq})
	}
	if got := slow.Dropped(); got != 49 {
		t.Errorf("slow subscriber dropped %d, want 49", got)
	}
	for want := uint64(1); want <= 50; want++ {
		if got := recv(t, fast).Seq; got != want {
			t.Fatalf("fast got %d, want %d", got, want)
		}
	}
}

func TestBusCancelReleasesBlockedPublish(t *testing.T) {
	b := core.NewMemBus(0)
	_, cancel := b.Subscribe(0, false) // reliable and never read
	done := make(chan struct{})
	go func() {
		b.Publish(core.Event{Seq: 1})
		close(done)
	}()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish still blocked after cancel")
	}
}

func TestBusFirstSeqSeen(t *testing.T) {
	b := core.NewMemBus(0)
	sub, cancel := b.Subscribe(16, false)
	defer cancel()
	for _, seq := range []uint64{5, 7, 6, 3, 8} {
		b.Publish(core.Event{Seq: seq})
	}
	// 5 starts the log; 7 waits for 6; 3 came too late.
	for _, want := range []uint64{5, 6, 7, 8} {
		if got := recv(t, sub).Seq; got != want {
			t.Fatalf("got seq %d, want %d", got, want)
		}
	}
	assertNothing(t, sub)
}

func TestBusUnloggedEventsDoNotWait(t *testing.T) {
	b := core.NewMemBus(1)
	sub, cancel := b.Subscribe(16, false)
	defer cancel()
	b.Publish(core.Event{Seq: 2})                            // waits for 1
	b.Publish(core.Event{Kind: core.EventOutput, Text: "…"}) // Seq 0: at once
	if e := recv(t, sub); e.Seq != 0 || e.Text != "…" {
		t.Fatalf("got %+v, want the unlogged event first", e)
	}
	b.Publish(core.Event{Seq: 1})
	for _, want := range []uint64{1, 2} {
		if got := recv(t, sub).Seq; got != want {
			t.Fatalf("got seq %d, want %d", got, want)
		}
	}
}

// TestBusSkipsAhead covers a writer that stored an event and died before
// publishing it: once more than the reorder buffer's worth of later events
// wait for it, the bus gives up on it and delivers from the earliest one
// waiting, and holds back again at the next gap.
func TestBusSkipsAhead(t *testing.T) {
	b := core.NewMemBus(1)
	sub, cancel := b.Subscribe(2*core.MaxPending, false)
	defer cancel()
	slow, cancelSlow := b.Subscribe(10, true)
	defer cancelSlow()

	// Seq 1 never comes; 11 comes late. Waiting: 2..10 and 12..1027,
	// one more than the buffer holds once 1027 arrives.
	last := uint64(core.MaxPending + 3)
	for seq := uint64(2); seq < last; seq++ {
		if seq != 11 {
			b.Publish(core.Event{Seq: seq})
		}
	}
	assertNothing(t, sub)
	b.Publish(core.Event{Seq: last})
	for want := uint64(2); want <= 10; want++ {
		if got := recv(t, sub).Seq; got != want {
			t.Fatalf("after skipping ahead got seq %d, want %d", got, want)
		}
	}
	assertNothing(t, sub) // 12 and later wait for 11

	b.Publish(core.Event{Seq: 1}) // the lost one, too late now
	assertNothing(t, sub)
	b.Publish(core.Event{Seq: 11})
	for want := uint64(11); want <= last; want++ {
		if got := recv(t, sub).Seq; got != want {
			t.Fatalf("got seq %d, want %d", got, want)
		}
	}
	b.Publish(core.Event{Seq: last + 1})
	if got := recv(t, sub).Seq; got != last+1 {
		t.Fatalf("got seq %d, want %d", got, last+1)
	}

	// A slow lossy subscriber got what fitted of each burst and counts the
	// rest; it never held the bus back.
	delivered := uint64(len(slow.C))
	if delivered != 10 {
		t.Errorf("slow subscriber holds %d events, want a full buffer of 10", delivered)
	}
	sent := last // seqs 2 through last+1
	if got, want := slow.Dropped(), sent-delivered; got != want {
		t.Errorf("slow subscriber dropped %d, want %d", got, want)
	}
}

func TestBusReliableSubscriberHoldsPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := core.NewMemBus(1)
		sub, cancel := b.Subscribe(1, false)
		defer cancel()
		b.Publish(core.Event{Seq: 1}) // fills the buffer
		done := make(chan struct{})
		go func() {
			b.Publish(core.Event{Seq: 2})
			close(done)
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("Publish returned while a reliable subscriber's buffer was full")
		default:
		}
		if got := (<-sub.C).Seq; got != 1 {
			t.Fatalf("got seq %d, want 1", got)
		}
		synctest.Wait()
		select {
		case <-done:
		default:
			t.Fatal("Publish still blocked after the subscriber read")
		}
		if got := (<-sub.C).Seq; got != 2 {
			t.Fatalf("got seq %d, want 2", got)
		}
	})
}

func TestBusCancel(t *testing.T) {
	b := core.NewMemBus(1)
	sub, cancel := b.Subscribe(4, false)
	other, cancelOther := b.Subscribe(4, false)
	defer cancelOther()
	cancel()
	cancel() // twice is harmless
	b.Publish(core.Event{Seq: 1})
	select {
	case e, ok := <-sub.C:
		if !ok {
			t.Fatal("cancel closed C, which is never closed")
		}
		t.Fatalf("a cancelled subscription got %+v", e)
	default:
	}
	if got := recv(t, other).Seq; got != 1 {
		t.Fatalf("the other subscriber got seq %d, want 1", got)
	}
}

type consumed struct {
	seq   uint64
	live  bool // the context was not cancelled when fn was called
	value any  // the context's value for ctxKey
}

func TestConsume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := core.NewMemBus(1)
		sub, cancel := b.Subscribe(8, false)
		defer cancel()
		ctx, stop := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "daemon"))
		var got []consumed
		returned := make(chan struct{})
		go func() {
			core.Consume(ctx, sub, func(ctx context.Context, e core.Event) {
				got = append(got, consumed{e.Seq, ctx.Err() == nil, ctx.Value(ctxKey{})})
			})
			close(returned)
		}()
		for seq := uint64(1); seq <= 3; seq++ {
			b.Publish(core.Event{Seq: seq})
		}
		synctest.Wait()
		want := []consumed{{1, true, "daemon"}, {2, true, "daemon"}, {3, true, "daemon"}}
		if !slices.Equal(got, want) {
			t.Fatalf("while running, fn got %+v, want %+v", got, want)
		}
		stop()
		synctest.Wait()
		select {
		case <-returned:
		default:
			t.Fatal("Consume did not return after its context ended")
		}
	})
}

// TestConsumeDrains stops a consumer while events wait in its buffer: a
// graceful stop loses none of them.
func TestConsumeDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := core.NewMemBus(1)
		sub, cancel := b.Subscribe(8, false)
		defer cancel()
		ctx, stop := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "daemon"))
		release := make(chan struct{})
		var got []consumed
		returned := make(chan struct{})
		go func() {
			core.Consume(ctx, sub, func(ctx context.Context, e core.Event) {
				got = append(got, consumed{e.Seq, ctx.Err() == nil, ctx.Value(ctxKey{})})
				if e.Seq == 1 {
					<-release // busy with the first event while more arrive
				}
			})
			close(returned)
		}()
		for seq := uint64(1); seq <= 5; seq++ {
			b.Publish(core.Event{Seq: seq})
		}
		synctest.Wait()
		stop()
		close(release)
		synctest.Wait()
		select {
		case <-returned:
		default:
			t.Fatal("Consume did not return after draining its buffer")
		}
		if len(got) != 5 {
			t.Fatalf("fn got %d events, want all 5: %+v", len(got), got)
		}
		for i, c := range got {
			if c.seq != uint64(i+1) || c.value != "daemon" {
				t.Errorf("event %d: got %+v, want seq %d with the consumer's context values", i, c, i+1)
			}
		}
		// Every event gets a live context, those buffered at the stop
		// included: with both ready, Consume's select may take an event
		// after the context ended, and that one must not see it either.
		for _, c := range got {
			if !c.live {
				t.Errorf("event %d got a cancelled context", c.seq)
			}
		}

		// Published after the consumer stopped: not Consume's any more.
		b.Publish(core.Event{Seq: 6})
		if e := recv(t, sub); e.Seq != 6 {
			t.Fatalf("got seq %d, want 6 still in the subscription", e.Seq)
		}
	})
}

func TestConsumeAfterStop(t *testing.T) {
	b := core.NewMemBus(1)
	sub, cancel := b.Subscribe(8, false)
	defer cancel()
	ctx, stop := context.WithCancel(t.Context())
	stop()
	// Nothing buffered: it returns at once, without waiting for events.
	core.Consume(ctx, sub, func(context.Context, core.Event) { t.Error("fn called with nothing buffered") })
}

func assertNothing(t *testing.T, sub *core.Subscription) {
	t.Helper()
	select {
	case e := <-sub.C:
		t.Fatalf("got %+v, want nothing yet", e)
	default:
	}
}

// A resync jumps over events that will never come: it is delivered at once,
// held events it covers are dropped, and those after it follow.
func TestBusResyncJumps(t *testing.T) {
	b := core.NewMemBus(1)
	sub, cancel := b.Subscribe(16, false)
	defer cancel()
	b.Publish(core.Event{Seq: 1})
	b.Publish(core.Event{Seq: 3})  // waits for 2, which the resync covers
	b.Publish(core.Event{Seq: 11}) // waits for 10
	b.Publish(core.Event{Seq: 9, Kind: core.EventResync})
	b.Publish(core.Event{Seq: 10})
	b.Publish(core.Event{Seq: 4}) // covered by the resync: dropped
	b.Publish(core.Event{Seq: 12})
	var got []uint64
	for range 5 {
		got = append(got, recv(t, sub).Seq)
	}
	if want := []uint64{1, 9, 10, 11, 12}; !slices.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
}

// An unordered bus (one of several instances) delivers as published: the
// Seqs between its events are other instances'.
func TestUnorderedBusDeliversAtOnce(t *testing.T) {
	b := core.NewUnorderedMemBus()
	sub, cancel := b.Subscribe(16, false)
	defer cancel()
	for _, seq := range []uint64{3, 7, 5} {
		b.Publish(core.Event{Seq: seq})
	}
	for _, want := range []uint64{3, 7, 5} {
		if got := recv(t, sub).Seq; got != want {
			t.Fatalf("got seq %d, want %d", got, want)
		}
	}
}
