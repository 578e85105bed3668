package web

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/parley-chat/parley/adapters/web/httpguard"
)

// Every /api/events stream ends by design, and is reconnected (the
// package doc has what the client sees).
//
// SSE has no way back from the client, so nothing the client sends can say
// it still reads, and its system acknowledges the heartbeats whether or not
// it does: a client that reads nothing while nothing happens looks like one
// that reads, for as long as it likes. SSE's own way of keeping clients is
// reconnection (https://html.spec.whatwg.org/multipage/server-sent-events.html#sse-processing-model):
// the server ends the response, and EventSource connects again after the
// stream's "retry:" time, saying with Last-Event-ID the last id it got. An
// id in a message without data sets that id too, without an event, which
// is how a stream gives a resume point before its first event. So each
// stream lasts Options.StreamLifetime, and at most Options.MaxStreams are
// open: a client that reads nothing costs nothing after the lifetime, and
// the streams together at most MaxStreams times what one holds.
//
// The lifetime runs from when the stream starts, replay included: a stream
// far behind ends once it has caught up, and resumes from there. At the
// end the whole states still due are sent (uiwire.go), so that the next
// stream has only what is new to send, then the reconnect message; then
// the connection closes in good order when the client has acknowledged
// everything, and is reset when not (httpguard.Settled), dropping what a
// client that does not read did not take. A stream ended to make room is
// the oldest: the one whose client has had the most, and which will be
// ended by its lifetime soonest anyway. It stops counting at once, and is
// gone within endWait, or what is left of a blocked write's deadline.

const (
	// DefaultStreamLifetime is Options.StreamLifetime's default. A client
	// that reads nothing is gone within 30 s of connecting: the stream
	// ends at 25 s, and its end takes at most endWait (nothing waits for
	// an idle client's acknowledgement, so in practice none of it). A
	// stream costs a reconnect per lifetime — a connection and one read of
	// the event log, about 150 an hour for an open page — and holds live
	// events back by the retry time (retryMillis) once per lifetime.
	DefaultStreamLifetime = 25 * time.Second
	// DefaultMaxStreams is Options.MaxStreams's default: a stream holds
	// about 35 KiB (its goroutines, the connection's buffers, its bus
	// buffer), so 1024 hold about 36 MiB.
	DefaultMaxStreams = 1024
	// retryMillis is the stream's "retry:": how long EventSource waits
	// before it reconnects, and so how long a reconnect by design holds
	// live events back.
	retryMillis = 1000
	// endWait bounds a stream's end by design: the reconnect message is
	// written within it, and the client's acknowledgement of the whole
	// stream waited for until it.
	endWait = 2 * time.Second
)

// Why a stream ends by design.
var (
	errLifetime = errors.New("the stream's lifetime is over")
	errCrowded  = errors.New("too many streams: the oldest ends to make room")
)

// streamSet is the open streams, oldest first, for Options.MaxStreams.
type streamSet struct {
	mu   sync.Mutex
	open list.List // of chan struct{}, closed to end its stream
}

// join counts a new stream in; when max are open already, the oldest are
// told to end and counted out (evicted says how many). ended is closed
// when the stream is to end to make room; leave counts it out (defer it).
func (ss *streamSet) join(max int) (ended <-chan struct{}, evicted int, leave func()) {
	ch := make(chan struct{})
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for ss.open.Len() >= max {
		close(ss.open.Remove(ss.open.Front()).(chan struct{}))
		evicted++
	}
	e := ss.open.PushBack(ch)
	return ch, evicted, func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		ss.open.Remove(e) // nothing when it was removed to make room
	}
}

// reconnectMessage is the data of a "reconnect" SSE message.
type reconnectMessage struct {
	Kind   string `json:"kind"` // "reconnect"
	Resume uint64 `json:"resume"`
	Reason string `json:"reason"`
}

// finish ends a stream by design (why: errLifetime or errCrowded): it
// sends the whole states still due and says it ends, and reports whether the client took everything. When it did not,
// the write deadline is past, so net/http's last write fails and closes
// the connection at once, while BoundStream's reset is armed.
func (s *stream) finish(ctx context.Context, r *http.Request, why error) bool {
	until := time.Now().Add(endWait)
	// The states still due go first: the next stream sends only what is
	// new.
	if len(s.dirty) > 0 {
		if err := s.writeStates(ctx); err != nil {
			s.buf.Reset()
		}
	}
	data, _ := json.Marshal(reconnectMessage{Kind: "reconnect", Resume: s.last,
		Reason: why.Error() + "; reconnect with Last-Event-ID"})
	fmt.Fprintf(&s.buf, "id: %d\nevent: reconnect\ndata: %s\n\n", s.last, data)
	if err := s.flushBy(until); err != nil {
		return false // the connection is closed already
	}
	if httpguard.Settled(ctx, r, until) {
		return true
	}
	_ = s.rc.SetWriteDeadline(time.Now())
	return false
}
