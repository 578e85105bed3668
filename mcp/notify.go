package mcp

import (
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// batchSender sends one notifications/resources/updated for uri to one
// consumer: the messages, or a bare {uri} (re-read) when msgs is nil. It
// returns errGone when the consumer is gone for good and errBlocked when its
// stream cannot take more now; what any other error left unsent waits for
// the next round.
type batchSender func(uri string, msgs []wireMsg) error

var (
	errGone    = errors.New("subscriber gone")
	errBlocked = errors.New("subscriber stream full")
)

// wireMsg is an inbox message encoded once, for every subscriber.
type wireMsg struct {
	raw  json.RawMessage
	size int // of its content, for batchSize
}

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

// registry holds the subscriptions of every MCP connection and what waits
// for each. The bus consumer only enqueues (non-blocking, bounded) and
// wakes the subscriber's consumer — its connection's own goroutine (the
// 2025-11-25 GET stream, the 2026-07-28 listen request's), which runs
// deliver — so a slow client holds up nobody else and costs no goroutine
// of its own.
type registry struct {
	window time.Duration
	log    *slog.Logger

	mu     sync.RWMutex
	subs   map[any]*subscriber
	scopes map[core.SessionID]map[*subscriber]struct{} // "" = all sessions
	closed bool
	// closing is closed by close: listen streams' deliveries end.
	closing chan struct{}
	// moved is closed (and replaced) when the scopes change (presence.go).
	moved chan struct{}
	// live says whether a subscriber's client can hear now (conns.go);
	// nil counts every subscriber.
	live func(key any) bool
}

// subscriber is one MCP connection: a 2025-11-25 session (keyed by its id)
// or a 2026-07-28 listen stream (keyed by its mcp-go session).
type subscriber struct {
	key any
	// uris maps each subscribed URI to the sessions it covers; guarded by
	// registry.mu.
	uris map[string]core.SessionID

	mu      sync.Mutex
	pending map[string]*uriQueue
	order   []string // the keys of pending, first come first
	queued  int      // messages in pending

	// wake is the consumer's: signalled when something waits.
	wake chan<- struct{}
}

func newRegistry(window time.Duration, log *slog.Logger) *registry {
	return &registry{window: window, log: log, subs: map[any]*subscriber{},
		scopes: map[core.SessionID]map[*subscriber]struct{}{}, closing: make(chan struct{})}
}

// add subscribes key to uri, which covers scope; wake is signalled when
// notifications wait for key (its consumer's, given with the first add).
func (r *registry) add(key any, wake chan<- struct{}, uri string, scope core.SessionID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	sub := r.subs[key]
	if sub == nil {
		sub = &subscriber{key: key, uris: map[string]core.SessionID{}, pending: map[string]*uriQueue{}, wake: wake}
		r.subs[key] = sub
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
	r.movedLocked()
}

func (r *registry) count() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.subs)
}

// close drops every subscription and ends the deliveries of listen
// streams.
func (r *registry) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	for _, sub := range r.subs {
		r.dropLocked(sub)
	}
	close(r.closing)
}

// publish queues m for every subscription covering session. It never
// blocks on a subscriber, and encodes m once.
func (r *registry) publish(session core.SessionID, m InboxMessage) {
	raw, err := json.Marshal(m)
	if err != nil {
		r.log.Error("cannot encode a message for notifications", "session", session, "err", err)
		return
	}
	wm := wireMsg{raw: raw, size: len(m.Content)}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, scope := range []core.SessionID{"", session} {
		for sub := range r.scopes[scope] {
			for uri, sc := range sub.uris {
				if sc == scope {
					sub.enqueue(uri, wm)
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
		sub.signal()
	}
}

// uriQueue is what waits for one subscribed URI: messages, or after an
// overflow just the fact that the client must re-read.
type uriQueue struct {
	msgs     []wireMsg
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

func (s *subscriber) enqueue(uri string, m wireMsg) {
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
	s.signal()
}

// signal wakes the subscriber's consumer.
func (s *subscriber) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// deliver is a consumer's loop: until ctxDone or gone is closed, it sends
// key's notifications with send each time it is woken, the first after a
// quiet spell at once, then at most one round per window, so bursts are
// coalesced. A blocked stream is retried with backoff; any other failure of
// send ends the loop with it. tick, when not nil, runs onTick, whose error
// ends the loop too (the GET stream's heartbeat).
func (r *registry) deliver(key any, wake <-chan struct{}, ctxDone, gone <-chan struct{}, send batchSender,
	tick <-chan time.Time, onTick func(time.Time) error) error {
	hold := time.NewTimer(0)
	<-hold.C
	defer hold.Stop()
	var (
		holding bool
		backoff time.Duration
	)
	due := true // what waited before the consumer came
	for {
		if due && !holding {
			due = false
			sent, err := r.flush(key, send)
			switch {
			case errors.Is(err, errBlocked):
				backoff = min(max(2*backoff, retryMin), retryMax)
				hold.Reset(backoff)
				holding, due = true, true // retry even if nothing new arrives
			case err != nil:
				return err
			case sent:
				backoff = 0
				hold.Reset(r.window)
				holding = true
			}
		}
		select {
		case <-wake:
			due = true
		case <-hold.C:
			holding = false
		case now := <-tick:
			if err := onTick(now); err != nil {
				return err
			}
		case <-ctxDone:
			return nil
		case <-gone:
			return nil
		}
	}
}

// flush sends everything pending for key and reports whether it sent
// anything. What a blocked stream could not take goes back as an overflow
// (a bare {uri}: the client re-reads) rather than as a partial batch; what
// another failure left goes back as it was, ahead of what came meanwhile.
func (r *registry) flush(key any, send batchSender) (sent bool, err error) {
	r.mu.RLock()
	sub := r.subs[key]
	r.mu.RUnlock()
	if sub == nil {
		return false, nil
	}
	sub.mu.Lock()
	order, pending := sub.order, sub.pending
	sub.order, sub.pending, sub.queued = nil, map[string]*uriQueue{}, 0
	sub.mu.Unlock()
	for i, uri := range order {
		q := pending[uri]
		if q.overflow {
			if err = send(uri, nil); err == nil {
				q.overflow, sent = false, true
			}
		}
		for len(q.msgs) > 0 && err == nil {
			n := batchSize(q.msgs)
			if err = send(uri, q.msgs[:n]); err == nil {
				q.msgs, sent = q.msgs[n:], true
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
			return sent, err
		case errors.Is(err, errGone):
			r.mu.Lock()
			if r.subs[key] == sub {
				r.dropLocked(sub)
			}
			r.mu.Unlock()
			return sent, err
		default:
			sub.requeue(order[i:], pending)
			return sent, err
		}
	}
	return sent, nil
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
func batchSize(msgs []wireMsg) int {
	n, size := 0, 0
	for n < len(msgs) && n < maxBatch {
		size += msgs[n].size
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

// appendMessages appends msgs as a JSON array.
func appendMessages(b []byte, msgs []wireMsg) []byte {
	b = append(b, '[')
	for i, m := range msgs {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, m.raw...)
	}
	return append(b, ']')
}

// appendUpdateEvent appends the SSE event of one
// notifications/resources/updated {uri, messages} (a bare {uri} when msgs
// is nil), from the messages as encoded once by publish.
func appendUpdateEvent(b []byte, uri string, msgs []wireMsg) []byte {
	q, _ := json.Marshal(uri) // a string always encodes
	b = append(b, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\""+mcp.MethodNotificationResourceUpdated+"\",\"params\":{\"uri\":"...)
	b = append(b, q...)
	if msgs != nil {
		b = append(b, `,"messages":`...)
		b = appendMessages(b, msgs)
	}
	return append(b, "}}\n\n"...)
}
