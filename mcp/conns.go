package mcp

import (
	"crypto/rand"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// Connections (conns.go, guard.go, stream.go). mcp-go keeps a 2025-11-25
// session until its client sends DELETE, and would write a GET stream for
// as long as the socket takes bytes. The Server therefore owns each MCP
// session's life and its GET stream:
//
//   - A session's binding (?session=ID or the Parley-Session header) is
//     fixed at its initialize; a later request of the session naming any
//     other binding is refused with HTTP 403 and a JSON-RPC error, whatever
//     its method, so the URL of one request cannot re-bind a connection.
//   - A session that has no request in flight (an open GET stream counts as
//     one) for idleTimeout ends, as if its client had sent DELETE: its
//     subscriptions and queue go, and a client that comes back is answered
//     404 and initializes again.
//   - At most Options.MaxSessions sessions and 2026-07-28 listen streams
//     are open. An initialize at the bound ends the session that has been
//     idle longest (nothing in flight, no stream) to make room; only when
//     none is idle is it answered 503 with a JSON-RPC error naming [mcp]
//     max_sessions. The daemon's own client (the orchestrator, recognised
//     by the secret Server.OwnClientHeader, which no other client knows) is
//     never the one ended to make room, and is admitted even at the bound.
//     A listen stream is a request in flight: never ended to make room.
//   - The GET stream is parley's (stream.go), not mcp-go's: it carries the
//     session's notifications and a ping every heartbeat, which a client
//     that reads answers with a POST. A stream whose session made no
//     request for staleAfter is cut off, checked every staleCheck: its
//     client is not reading. Every write has a deadline (writeTimeout). A
//     session whose stream was cut, or failed on a write, is ended.
//   - Presence is about who can hear now: a 2025-11-25 session counts as
//     listening while it has a request in flight (its GET stream included)
//     or made one within presenceWindow. A 2026-07-28 listen stream counts
//     while its request is open.
const (
	writeTimeout   = 10 * time.Second
	heartbeat      = 10 * time.Second
	staleAfter     = 2 * heartbeat
	staleCheck     = heartbeat / 2
	presenceWindow = 45 * time.Second
	idleTimeout    = 60 * time.Second
	// DefaultMaxSessions bounds the MCP sessions when Options.MaxSessions
	// is 0.
	DefaultMaxSessions = 256
)

// headerSessionID is the Streamable HTTP session header.
const headerSessionID = "Mcp-Session-Id"

// conns tracks each 2025-11-25 MCP session from its initialize to its end.
type conns struct {
	changed func()          // presence may have changed; called without mu
	idle    func(id string) // ends session id, idle for idleTimeout; called without mu

	mu       sync.Mutex
	sessions map[string]*connState
}

type connState struct {
	bind binding // fixed at initialize
	own  bool    // the daemon's own client

	seen     time.Time   // the last request's start or end
	inflight int         // requests in flight, GET streams included
	expire   *time.Timer // presence ends at seen+presenceWindow, once idle
	idle     *time.Timer // the session ends at seen+idleTimeout, once idle

	// wake is signalled when notifications wait for the session (the
	// registry's subscriber holds it); its open GET stream sends them.
	wake chan struct{}
	// gone is closed when the session ends: its stream ends too.
	gone chan struct{}
	// stream is the open GET stream's, if any (attach).
	stream *streamRef
}

// streamRef ends one GET stream.
type streamRef struct{ stop func() }

func newConns(changed func(), idle func(id string)) *conns {
	return &conns{changed: changed, idle: idle, sessions: map[string]*connState{}}
}

// liveLocked reports whether st's client can hear now.
func liveLocked(st *connState, now time.Time) bool {
	return st != nil && (st.inflight > 0 || now.Sub(st.seen) < presenceWindow)
}

// opened records the session id that an initialize, still in flight,
// made: bound to b, and the daemon's own client when own. The initialize's
// end (guard) is its first end.
func (c *conns) opened(id string, b binding, own bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions[id] != nil {
		return
	}
	st := &connState{bind: b, own: own, seen: time.Now(), inflight: 1,
		wake: make(chan struct{}, 1), gone: make(chan struct{})}
	st.idle = time.AfterFunc(idleTimeout, func() { c.idleEnd(id, st) })
	st.idle.Stop()
	c.sessions[id] = st
}

// idleEnd ends session id if it is still st and still idle.
func (c *conns) idleEnd(id string, st *connState) {
	c.mu.Lock()
	idle := c.sessions[id] == st && st.inflight == 0 && time.Since(st.seen) >= idleTimeout
	c.mu.Unlock()
	if idle {
		c.idle(id)
	}
}

// begin records the start of a request of session id; false when the
// session is not known (it never initialized, or ended).
func (c *conns) begin(id string) bool {
	now := time.Now()
	c.mu.Lock()
	st := c.sessions[id]
	if st == nil {
		c.mu.Unlock()
		return false
	}
	was := liveLocked(st, now)
	st.seen = now
	st.inflight++
	if st.expire != nil {
		st.expire.Stop()
	}
	st.idle.Stop()
	c.mu.Unlock()
	if !was {
		c.changed()
	}
	return true
}

// end records the end of a request of session id; when it was the last in
// flight, presence ends presenceWindow later and the session idleTimeout
// later, unless another request comes.
func (c *conns) end(id string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sessions[id]
	if st == nil {
		return // the session ended meanwhile
	}
	st.seen = now
	if st.inflight--; st.inflight > 0 {
		return
	}
	if st.expire == nil {
		st.expire = time.AfterFunc(presenceWindow, c.changed)
	} else {
		st.expire.Reset(presenceWindow)
	}
	st.idle.Reset(idleTimeout)
}

// lastSeen reports when session id last began or ended a request.
func (c *conns) lastSeen(id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.sessions[id]; st != nil {
		return st.seen
	}
	return time.Time{}
}

// has reports whether session id is open.
func (c *conns) has(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id] != nil
}

// binding is session id's binding, fixed at its initialize.
func (c *conns) binding(id string) (binding, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sessions[id]
	if st == nil {
		return binding{}, false
	}
	return st.bind, true
}

// channels are session id's wake and gone channels.
func (c *conns) channels(id string) (wake chan struct{}, gone <-chan struct{}, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sessions[id]
	if st == nil {
		return nil, nil, false
	}
	return st.wake, st.gone, true
}

// attach makes stop end session id's GET stream from now on, and ends the
// one open before, if any: a session has one stream (a client opening
// more would hold a connection and a goroutine for each). detach undoes
// it when the stream ends.
func (c *conns) attach(id string, stop func()) (detach func()) {
	ref := &streamRef{stop: stop}
	c.mu.Lock()
	var old *streamRef
	if st := c.sessions[id]; st != nil {
		old, st.stream = st.stream, ref
	}
	c.mu.Unlock()
	if old != nil {
		old.stop()
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if st := c.sessions[id]; st != nil && st.stream == ref {
			st.stream = nil
		}
	}
}

// live reports whether session id's client can hear now.
func (c *conns) live(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return liveLocked(c.sessions[id], time.Now())
}

// victim is the session to end to make room: of those with nothing in
// flight, the one idle longest, never the daemon's own; "" when none is
// idle.
func (c *conns) victim() (id string, idleFor time.Duration) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var oldest time.Time
	for sid, st := range c.sessions {
		if st.own || st.inflight > 0 {
			continue
		}
		if id == "" || st.seen.Before(oldest) {
			id, oldest = sid, st.seen
		}
	}
	if id == "" {
		return "", 0
	}
	return id, now.Sub(oldest)
}

// forget drops session id (it ended): its streams end.
func (c *conns) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.sessions[id]; st != nil {
		st.stopLocked()
		delete(c.sessions, id)
	}
}

// closeAll drops every session (the server closes).
func (c *conns) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, st := range c.sessions {
		st.stopLocked()
		delete(c.sessions, id)
	}
}

func (st *connState) stopLocked() {
	if st.expire != nil {
		st.expire.Stop()
	}
	st.idle.Stop()
	close(st.gone)
}

// sessionIDs gives mcp-go its session id manager for each request: ids
// are unguessable (128 random bits) and valid while the session is open.
// mcp-go's stateful manager remembered every id it ever ended, so that
// memory grew with each session; here an ended id is simply unknown (404
// either way). The id made for an initialize is left in the request's
// initState, so that guard can end a session mcp-go registered for an
// initialize that failed (v1.2.1's handlePost registers it whatever the
// result, and nobody could use or end it).
type sessionIDs struct{ c *conns }

var (
	_ server.SessionIdManagerResolver = sessionIDs{}
	_ server.SessionIdManager         = idManager{}
)

func (m sessionIDs) ResolveSessionIdManager(r *http.Request) server.SessionIdManager {
	var init *initState
	if r != nil {
		init, _ = r.Context().Value(initKey{}).(*initState)
	}
	return idManager{c: m.c, init: init}
}

type idManager struct {
	c    *conns
	init *initState
}

var errNoSession = errors.New("no such MCP session (it ended, or the daemon restarted): initialize again")

func (m idManager) Generate() string {
	id := "mcp-session-" + rand.Text()
	if m.init != nil {
		m.init.made = id
	}
	return id
}

func (m idManager) Validate(id string) (isTerminated bool, err error) {
	if m.c.has(id) {
		return false, nil
	}
	return false, errNoSession
}

func (m idManager) Terminate(string) (isNotAllowed bool, err error) { return false, nil }
