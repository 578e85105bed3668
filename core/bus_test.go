package core_test

import (
	"slices"
	"testing"
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
