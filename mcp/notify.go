package mcp

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// sender delivers one notifications/resources/updated to one MCP
// connection without blocking. It returns errGone when the connection is
// gone for good, errBlocked when its stream cannot take more now, and
// errNoStream when it has no stream to carry notifications until the
// registry is woken for it (wake).
type sender func(params map[string]any) error

var (
	errGone     = errors.New("subscriber gone")
	errBlocked  = errors.New("subscriber stream full")
	errNoStream = errors.New("subscriber has no stream open")
)

// Notification fan-out bounds.
const (
	// maxQueued bounds the messages waiting for one subscriber; past it
	// the subscriber gets a bare {uri} notification and re-reads.
	maxQueued = 256
	// maxBatch is the most messages one notification carries, and
	// maxBatchBytes the most content (one message may be larger alone):
	// a notification waiting for a slow stream holds no more.
	maxBatch      = 32
	maxBatchBytes = 64 << 10
	// retryMin and retryMax bound the backoff for a blocked subscriber.
	retryMin = 50 * time.Millisecond
	retryMax = 5 * time.Second
)

// registry holds the subscriptions of every MCP connection. The bus
// consumer only enqueues (non-blocking, bounded); one worker per
// subscriber coalesces and sends, so a slow client holds up nobody else.
type registry struct {
	window time.Duration
	log    *slog.Logger

	mu     sync.RWMutex
	subs   map[any]*subscriber
	scopes map[core.SessionID]map[*subscriber]struct{} // "" = all sessions
	closed bool
	wg     sync.WaitGroup
	// moved is closed (and replaced) when the scopes change (presence.go).
	moved chan struct{}
	// live says whether a subscriber's client can hear now (conns.go);
	// nil counts every subscriber.
	live func(key any) bool
}

// subscriber is one MCP connection: a 2025-11-25 session (keyed by its id)
// or a 2026-07-28 listen stream (keyed by its mcp-go session).
type subscriber struct {
	key  any
	send sender
	// uris maps each subscribed URI to the sessions it covers; guarded by
	// registry.mu.
	uris map[string]core.SessionID

	mu      sync.Mutex
	pending map[string]*uriQueue
	order   []string // the keys of pending, first come first
	queued  int      // messages in pending

	wake chan struct{}
	stop chan struct{}
}

func newRegistry(window time.Duration, log *slog.Logger) *registry {
	return &registry{window: window, log: log, subs: map[any]*subscriber{}, scopes: map[core.SessionID]map[*subscriber]struct{}{}}
}

// add subscribes key to uri, which covers scope. newSender is called only
// when key has no subscription yet.
func (r *registry) add(key any, newSender func() sender, uri string, scope core.SessionID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	sub := r.subs[key]
	if sub == nil {
		sub = &subscriber{key: key, send: newSender(), uris: map[string]core.SessionID{},
			pending: map[string]*uriQueue{},
			wake:    make(chan struct{}, 1), stop: make(chan struct{})}
		r.subs[key] = sub
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.work(sub)
		}()
	}
	if old, ok := sub.uris[uri]; ok {
		r.unindexLocked(sub, old)
	}
	sub.uris[uri] = scope
	if r.scopes[scope] == nil {
		r.scopes[scope] = map[*subscriber]struct{}{}
	}
	r.scopes[scope][sub] = struct{}{}
	r.movedLocked()
}

// unindexLocked drops sub from scope's index unless another of its URIs
// still covers scope.
func (r *registry) unindexLocked(sub *subscriber, scope core.SessionID) {
	for _, sc := range sub.uris {
		if sc == scope {
			return
		}
	}
	delete(r.scopes[scope], sub)
	if len(r.scopes[scope]) == 0 {
		delete(r.scopes, scope)
	}
}

// remove unsubscribes key from uri.
func (r *registry) remove(key any, uri string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sub := r.subs[key]
	if sub == nil {
		return
	}
	scope, ok := sub.uris[uri]
	if !ok {
		return
	}
	delete(sub.uris, uri)
	r.unindexLocked(sub, scope)
	if len(sub.uris) == 0 {
		r.dropLocked(sub)
	}
	r.movedLocked()
}

// removeAll drops every subscription of key.
func (r *registry) removeAll(key any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sub := r.subs[key]; sub != nil {
		r.dropLocked(sub)
	}
}

func (r *registry) dropLocked(sub *subscriber) {
	for uri, scope := range sub.uris {
		delete(sub.uris, uri)
		r.unindexLocked(sub, scope)
	}
	delete(r.subs, sub.key)
	close(sub.stop)
	r.movedLocked()
}

func (r *registry) count() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.subs)
}

// wake makes key's worker try again (its stream opened).
func (r *registry) wake(key any) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if sub := r.subs[key]; sub != nil {
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// close stops every worker and waits for them.
func (r *registry) close() {
	r.mu.Lock()
	r.closed = true
	for _, sub := range r.subs {
		r.dropLocked(sub)
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// publish queues m for every subscription covering session. It never
// blocks on a subscriber.
func (r *registry) publish(session core.SessionID, m InboxMessage) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, scope := range []core.SessionID{"", session} {
		for sub := range r.scopes[scope] {
			for uri, sc := range sub.uris {
				if sc == scope {
					sub.enqueue(uri, m)
				}
			}
		}
	}
}

// resync tells every subscriber to re-read each URI it subscribed to (a
// bare {uri}): events were missed, which messages is unknown.
func (r *registry) resync() {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, sub := range r.subs {
		sub.mu.Lock()
		for uri := range sub.uris {
			sub.overflowLocked(sub.queue(uri))
		}
		sub.mu.Unlock()
		select {
		case sub.wake <- struct{}{}:
		default:
		}
	}
}

// uriQueue is what waits for one subscribed URI: messages, or after an
// overflow just the fact that the client must re-read.
type uriQueue struct {
	msgs     []InboxMessage
	overflow bool
}

// queue returns uri's queue, creating it. The caller holds s.mu.
func (s *subscriber) queue(uri string) *uriQueue {
	q := s.pending[uri]
	if q == nil {
		q = &uriQueue{}
		s.pending[uri] = q
		s.order = append(s.order, uri)
	}
	return q
}

// overflowLocked turns q into a bare "re-read" notice.
func (s *subscriber) overflowLocked(q *uriQueue) {
	s.queued -= len(q.msgs)
	q.msgs, q.overflow = nil, true
}

func (s *subscriber) enqueue(uri string, m InboxMessage) {
	s.mu.Lock()
	q := s.queue(uri)
	switch {
	case q.overflow:
		// Already to be told to re-read; nothing more to keep.
	case s.queued >= maxQueued:
		s.overflowLocked(q)
	default:
		q.msgs = append(q.msgs, m)
		s.queued++
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// work sends sub's notifications: the first message after a quiet spell at
// once, then at most one round per window, so bursts are coalesced.
func (r *registry) work(sub *subscriber) {
	backoff := time.Duration(0)
	timer := time.NewTimer(0)
	<-timer.C
	for {
		select {
		case <-sub.wake:
		case <-sub.stop:
			return
		}
		switch err := r.flush(sub); {
		case errors.Is(err, errNoStream):
			// Kept, messages and all; the stream's opening wakes us.
			backoff = 0
			continue
		case errors.Is(err, errGone):
			r.mu.Lock()
			if r.subs[sub.key] == sub {
				r.dropLocked(sub)
			}
			r.mu.Unlock()
			return
		case errors.Is(err, errBlocked):
			backoff = min(max(2*backoff, retryMin), retryMax)
			timer.Reset(backoff)
			select {
			case <-timer.C:
			case <-sub.stop:
				return
			}
			// Retry even if nothing new arrived.
			select {
			case sub.wake <- struct{}{}:
			default:
			}
			continue
		}
		backoff = 0
		timer.Reset(r.window)
		select {
		case <-timer.C:
		case <-sub.stop:
			timer.Stop()
			return
		}
	}
}

// flush sends everything pending. What a blocked stream could not take
// goes back as an overflow (a bare {uri}: the client re-reads) rather than
// as a partial batch; what found no stream goes back as it was, ahead of
// what came meanwhile.
func (r *registry) flush(sub *subscriber) error {
	sub.mu.Lock()
	order, pending := sub.order, sub.pending
	sub.order, sub.pending, sub.queued = nil, map[string]*uriQueue{}, 0
	sub.mu.Unlock()
	for i, uri := range order {
		q := pending[uri]
		var err error
		if q.overflow {
			if err = sub.send(map[string]any{"uri": uri}); err == nil {
				q.overflow = false
			}
		}
		for len(q.msgs) > 0 && err == nil {
			n := batchSize(q.msgs)
			if err = sub.send(map[string]any{"uri": uri, "messages": q.msgs[:n]}); err == nil {
				q.msgs = q.msgs[n:]
			}
		}
		switch {
		case err == nil:
		case errors.Is(err, errBlocked):
			sub.mu.Lock()
			for _, u := range order[i:] {
				sub.overflowLocked(sub.queue(u))
			}
			sub.mu.Unlock()
			return err
		case errors.Is(err, errNoStream):
			sub.requeue(order[i:], pending)
			return err
		default:
			return err
		}
	}
	return nil
}

// requeue puts back what flush took but could not send (order's queues in
// pending), ahead of what was queued meanwhile, within maxQueued.
func (s *subscriber) requeue(order []string, pending map[string]*uriQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	newOrder, newer := s.order, s.pending
	s.order, s.pending, s.queued = nil, map[string]*uriQueue{}, 0
	put := func(uri string, q *uriQueue) {
		dst := s.queue(uri)
		if q.overflow || dst.overflow {
			s.overflowLocked(dst)
			return
		}
		for _, m := range q.msgs {
			if s.queued >= maxQueued {
				s.overflowLocked(dst)
				return
			}
			dst.msgs = append(dst.msgs, m)
			s.queued++
		}
	}
	for _, uri := range order {
		put(uri, pending[uri])
	}
	for _, uri := range newOrder {
		put(uri, newer[uri])
	}
}

// batchSize is how many of msgs the next notification carries: at most
// maxBatch, and at most maxBatchBytes of content unless the first message
// alone is larger.
func batchSize(msgs []InboxMessage) int {
	n, size := 0, 0
	for n < len(msgs) && n < maxBatch {
		size += len(msgs[n].Content)
		if n > 0 && size > maxBatchBytes {
			break
		}
		n++
	}
	return n
}

// poke tells the watchers of presence that it may have changed: a
// subscriber's client came or went (conns.go).
func (r *registry) poke() {
	r.mu.Lock()
	r.movedLocked()
	r.mu.Unlock()
}
