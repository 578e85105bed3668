package orchestrator

import (
	"slices"
	"sync"
	"time"
)

// slots bounds the agent processes running at once (Options.MaxRunning).
// A worker holds a slot from before its process starts until it stopped.
// One that finds none free queues (first come, first served) and asks the
// least recently used idle holder to stop; a holder that becomes idle while
// others wait is asked at once. An asked holder that is busy again by the
// time it reads the request declines, and the next idle one is asked.
type slots struct {
	mu    sync.Mutex
	max   int
	held  map[*worker]*holding
	queue []*worker
}

type holding struct {
	idle  bool
	since time.Time // when it became idle
	asked bool      // asked to stop, not answered yet
}

func newSlots(n int) *slots { return &slots{max: n, held: map[*worker]*holding{}} }

// acquire takes a slot for w, or queues w and returns false: w's granted
// channel then receives when it has one.
func (s *slots) acquire(w *worker) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.held[w]; ok {
		return true
	}
	if len(s.held) < s.max && len(s.queue) == 0 {
		s.held[w] = &holding{}
		return true
	}
	if !slices.Contains(s.queue, w) {
		s.queue = append(s.queue, w)
	}
	s.evictLocked()
	return false
}

// idle says whether w's process is idle (or working, or about to).
func (s *slots) idle(w *worker, idle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[w]
	if !ok {
		return
	}
	h.idle, h.asked = idle, false
	if idle {
		h.since = time.Now()
		s.evictLocked()
	}
}

// declined: w was asked to stop but is busy.
func (s *slots) declined(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.held[w]; ok {
		h.asked = false
		h.idle = false
	}
	s.evictLocked()
}

// release gives w's slot (or its place in the queue) back and grants a
// freed slot to the first in the queue.
func (s *slots) release(w *worker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, w)
	s.queue = slices.DeleteFunc(s.queue, func(q *worker) bool { return q == w })
	for len(s.queue) > 0 && len(s.held) < s.max {
		next := s.queue[0]
		s.queue = s.queue[1:]
		s.held[next] = &holding{}
		select {
		case next.granted <- struct{}{}:
		default:
		}
	}
	s.evictLocked()
}

// running is how many slots are held.
func (s *slots) running() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held)
}

// evictLocked asks idle holders, least recently used first, to stop: as
// many as wait and are not already expecting a stop.
func (s *slots) evictLocked() {
	asked := 0
	for _, h := range s.held {
		if h.asked {
			asked++
		}
	}
	for asked < len(s.queue) {
		var lru *worker
		for w, h := range s.held {
			if h.idle && !h.asked && (lru == nil || h.since.Before(s.held[lru].since)) {
				lru = w
			}
		}
		if lru == nil {
			return
		}
		s.held[lru].asked = true
		asked++
		select {
		case lru.evict <- struct{}{}:
		default:
		}
	}
}
