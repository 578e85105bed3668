package fakeserver

import (
	"sync"
	"testing"
	"time"
)

// Signal tells waiters that a fake's state changed. The zero Signal is
// ready to use. Its methods may be called with the fake's own lock held:
// Signal takes only its own.
type Signal struct {
	mu   sync.Mutex
	wake chan struct{}
}

// Wait returns a channel closed by the next Changed. Take it before
// checking the state, so that a change between the check and the wait is
// not missed.
func (s *Signal) Wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

// Changed wakes everything waiting for a change.
func (s *Signal) Changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake != nil {
		close(s.wake)
	}
	s.wake = make(chan struct{})
}

// Await waits until cond holds, re-checking it on every change, and fails
// the test after timeout with "<name>: timed out after <timeout> waiting
// for <what>". cond may lock the fake: Await holds no lock while calling
// it.
func (s *Signal) Await(tb testing.TB, name string, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		wake := s.Wait()
		if cond() {
			return
		}
		select {
		case <-wake:
		case <-deadline.C:
			tb.Fatalf("%s: timed out after %v waiting for %s", name, timeout, what)
		}
	}
}
