package orchestrator

import (
	"testing"
	"testing/synctest"
	"time"
)

func slotWorker() *worker {
	return &worker{granted: make(chan struct{}, 1), evict: make(chan struct{}, 1)}
}

func signalled(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSlotsEvictLeastRecentlyUsed: waiting sessions ask idle holders to
// stop, the least recently idle first, one per waiter; a release grants
// the first waiter.
func TestSlotsEvictLeastRecentlyUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSlots(2)
		a, b, c, d := slotWorker(), slotWorker(), slotWorker(), slotWorker()
		if !s.acquire(a) || !s.acquire(b) {
			t.Fatal("free slots refused")
		}
		s.idle(b, true)
		time.Sleep(time.Second)
		s.idle(a, true)
		if s.acquire(c) {
			t.Fatal("a third slot granted")
		}
		if !signalled(b.evict) || signalled(a.evict) {
			t.Fatal("not the least recently used asked to stop")
		}
		if s.acquire(d) {
			t.Fatal("a third slot granted")
		}
		if !signalled(a.evict) {
			t.Fatal("a second waiter asked no second idle holder")
		}
		s.release(b)
		if !signalled(c.granted) || signalled(d.granted) {
			t.Fatal("not the first waiter granted")
		}
		// a turns busy before it reads its request: it declines, and no
		// one else is idle.
		s.idle(a, false)
		s.declined(a)
		if signalled(a.evict) || s.running() != 2 {
			t.Fatal("a busy holder asked to stop")
		}
		s.idle(a, true)
		if !signalled(a.evict) {
			t.Fatal("turning idle while d waits did not ask it to stop")
		}
		s.release(a)
		if !signalled(d.granted) {
			t.Fatal("d not granted")
		}
	})
}
