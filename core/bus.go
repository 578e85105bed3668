package core

import (
	"context"
	"sync"
	"sync/atomic"
)

// Bus fans events out to subscribers after they were stored.
type Bus interface {
	// Publish delivers e to the subscribers. It never blocks on lossy
	// subscribers; it blocks while a reliable subscriber's buffer is full.
	Publish(e Event)
	// Subscribe registers a subscriber. A reliable subscriber (lossy
	// false) receives every event; a lossy one (an SSE client, say) has
	// events dropped when its buffer is full and is told by Dropped. cancel
	// unregisters and closes the channel.
	Subscribe(buffer int, lossy bool) (sub *Subscription, cancel func())
}

// Subscription is one subscriber's feed. C is never closed: a subscriber
// stops reading when its own context ends, then cancels.
type Subscription struct {
	C       <-chan Event
	c       chan Event
	done    chan struct{}
	lossy   bool
	dropped atomic.Uint64
}

// Dropped is the number of events dropped because the buffer was full. A
// subscriber that sees it grow catches up from the store's event log.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// MemBus is the in-process Bus. Events that carry a Seq from the store's
// event log are delivered in Seq order even when concurrent writers publish
// them out of order, so a subscriber that remembers the last Seq it saw can
// resume from the log without gaps. Events with Seq 0 (not logged) are
// delivered at once.
type MemBus struct {
	mu      sync.Mutex
	subs    map[*Subscription]struct{}
	next    uint64           // next Seq to deliver; 0 until the first logged event
	pending map[uint64]Event // logged events waiting for an earlier Seq
	deliver sync.Mutex       // serialises delivery so order is kept
	// unordered: deliver as published (NewUnorderedMemBus).
	unordered bool
}

var _ Bus = (*MemBus)(nil)

// NewMemBus returns a bus whose first logged event will be Seq next (the
// store's LastEventSeq + 1). With next 0 it starts from the first Seq seen.
func NewMemBus(next uint64) *MemBus {
	return &MemBus{subs: map[*Subscription]struct{}{}, next: next, pending: map[uint64]Event{}}
}

// NewUnorderedMemBus returns a bus that delivers events as they are
// published, without waiting for the Seqs in between: for one of several
// instances sharing a store, whose own commits leave the other instances'
// Seqs between them. Each instance's cluster-wide feed, in Seq order, is
// store/follow's.
func NewUnorderedMemBus() *MemBus {
	return &MemBus{subs: map[*Subscription]struct{}{}, pending: map[uint64]Event{}, unordered: true}
}

// maxPending bounds the reorder buffer: if an earlier Seq never arrives (a
// writer died between storing and publishing), the bus skips ahead rather
// than holding events back forever.
const maxPending = 1024

// Publish implements Bus.
func (b *MemBus) Publish(e Event) {
	b.mu.Lock()
	var ready []Event
	switch {
	case e.Seq == 0 || b.unordered:
		ready = []Event{e}
	case b.next == 0 || e.Seq == b.next || e.Kind == EventResync && e.Seq > b.next:
		// A resync says that nothing up to its Seq will come: it jumps.
		if e.Kind == EventResync {
			for seq := range b.pending {
				if seq <= e.Seq {
					delete(b.pending, seq)
				}
			}
		}
		ready = append(ready, e)
		b.next = e.Seq + 1
		for {
			n, ok := b.pending[b.next]
			if !ok {
				break
			}
			delete(b.pending, b.next)
			ready = append(ready, n)
			b.next++
		}
	case e.Seq < b.next:
		// Already delivered or skipped; a late duplicate.
	default:
		b.pending[e.Seq] = e
		if len(b.pending) > maxPending {
			ready = b.skipAheadLocked()
		}
	}
	// Take the delivery lock before releasing mu so batches go out in the
	// order they became ready.
	b.deliver.Lock()
	subs := make([]*Subscription, 0, len(b.subs))
	for s := range b.subs {
		subs = append(subs, s)
	}
	b.mu.Unlock()
	defer b.deliver.Unlock()
	for _, ev := range ready {
		for _, s := range subs {
			s.send(ev)
		}
	}
}

func (b *MemBus) skipAheadLocked() []Event {
	min := uint64(0)
	for seq := range b.pending {
		if min == 0 || seq < min {
			min = seq
		}
	}
	var ready []Event
	b.next = min
	for {
		n, ok := b.pending[b.next]
		if !ok {
			return ready
		}
		delete(b.pending, b.next)
		ready = append(ready, n)
		b.next++
	}
}

func (s *Subscription) send(e Event) {
	if !s.lossy {
		select {
		case s.c <- e:
		case <-s.done:
		}
		return
	}
	select {
	case s.c <- e:
	case <-s.done:
	default:
		s.dropped.Add(1)
	}
}

// Subscribe implements Bus.
func (b *MemBus) Subscribe(buffer int, lossy bool) (*Subscription, func()) {
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, done: make(chan struct{}), lossy: lossy}
	b.mu.Lock()
	b.subs[s] = struct{}{}
	b.mu.Unlock()
	var once sync.Once
	return s, func() {
		once.Do(func() {
			b.mu.Lock()
			delete(b.subs, s)
			b.mu.Unlock()
			close(s.done) // releases a delivery blocked on this subscriber
		})
	}
}

// Consume calls fn for each event of sub until ctx ends, then for the events
// still buffered (with a context that is not cancelled), so a graceful stop
// loses nothing that was already published.
func Consume(ctx context.Context, sub *Subscription, fn func(context.Context, Event)) {
	for ctx.Err() == nil {
		select {
		case e := <-sub.C:
			// Both cases may be ready when ctx ends; select picks one at
			// random, so an event received here may meet an ended ctx.
			if ctx.Err() != nil {
				fn(context.WithoutCancel(ctx), e)
				continue
			}
			fn(ctx, e)
		case <-ctx.Done():
		}
	}
	rest := context.WithoutCancel(ctx)
	for {
		select {
		case e := <-sub.C:
			fn(rest, e)
		default:
			return
		}
	}
}
