package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Connections (conns.go). mcp-go keeps a 2025-11-25 session until its
// client sends DELETE or it idles out, and writes its GET stream for as
// long as the socket takes bytes: a client that stopped reading, or exited
// without DELETE, went on counting as listening, and its queued
// notifications held memory. The Server's HTTP handler therefore wraps
// mcp-go's and watches each MCP session's requests:
//
//   - Every write to a response has a deadline (writeTimeout); a stream
//     whose client does not take the bytes fails and ends.
//   - A GET stream carries a ping every heartbeat, which a client that reads
//     it answers with a POST. A stream whose session made no request for
//     staleAfter is cut off, checked every staleCheck: its client is not
//     reading. A session whose stream was cut off, or failed on a write, is
//     ended as if its client had sent DELETE, which frees its queue and
//     subscriptions; a client that was merely slow is answered 404 and
//     initializes again (as parley mcp does).
//   - Presence is about who can hear now: a 2025-11-25 session counts as
//     listening while it has a request in flight (its GET stream included)
//     or made one within presenceWindow. A client that exited stops
//     counting within presenceWindow of its last request; one that stopped
//     reading, within staleAfter+staleCheck (the cut) and at most
//     presenceWindow. A 2026-07-28 listen stream counts while its request
//     is open.
//   - A 2025-11-25 session's notifications go out only while its GET stream
//     is open (from mcp-go's first flush of the stream to its end); the
//     stream's opening wakes the ones that waited (legacySender).
//   - At most Options.MaxSessions sessions and listen streams at once; an
//     initialize or subscriptions/listen past the bound is answered 503
//     with a JSON-RPC error naming [mcp] max_sessions.
const (
	writeTimeout   = 10 * time.Second
	heartbeat      = 10 * time.Second
	staleAfter     = 2 * heartbeat
	staleCheck     = heartbeat / 2
	presenceWindow = 45 * time.Second
	// DefaultMaxSessions bounds the MCP sessions when Options.MaxSessions
	// is 0.
	DefaultMaxSessions = 256
)

// headerSessionID is the Streamable HTTP session header.
const headerSessionID = "Mcp-Session-Id"

// conns tracks the activity of each 2025-11-25 MCP session.
type conns struct {
	changed func() // presence may have changed; called without mu

	mu       sync.Mutex
	sessions map[string]*connState
}

type connState struct {
	seen     time.Time
	inflight int         // requests in flight, GET streams included
	streams  int         // GET streams open (answered 200)
	expire   *time.Timer // at seen+presenceWindow, once idle
}

func newConns(changed func()) *conns {
	return &conns{changed: changed, sessions: map[string]*connState{}}
}

// liveLocked reports whether st's client can hear now.
func liveLocked(st *connState, now time.Time) bool {
	return st != nil && (st.inflight > 0 || now.Sub(st.seen) < presenceWindow)
}

// begin records the start of a request of session id.
func (c *conns) begin(id string) {
	now := time.Now()
	c.mu.Lock()
	st := c.sessions[id]
	was := liveLocked(st, now)
	if st == nil {
		st = &connState{}
		c.sessions[id] = st
	}
	st.seen = now
	st.inflight++
	if st.expire != nil {
		st.expire.Stop()
	}
	c.mu.Unlock()
	if !was {
		c.changed()
	}
}

// end records the end of a request of session id; when it was the last in
// flight, presence ends presenceWindow later unless another comes.
func (c *conns) end(id string) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sessions[id]
	if st == nil {
		return // forgotten (the session ended) meanwhile
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
}

// seenSince reports when session id last began or ended a request.
func (c *conns) lastSeen(id string) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.sessions[id]; st != nil {
		return st.seen
	}
	return time.Time{}
}

// streamOpened records that a GET stream of session id is open: mcp-go
// answered it and its writer reads the session's notifications.
func (c *conns) streamOpened(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.sessions[id]; st != nil {
		st.streams++
	}
}

// streamClosed records the end of a GET stream streamOpened recorded.
func (c *conns) streamClosed(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.sessions[id]; st != nil && st.streams > 0 {
		st.streams--
	}
}

// streaming reports whether session id has a GET stream open.
func (c *conns) streaming(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.sessions[id]
	return st != nil && st.streams > 0
}

// live reports whether session id's client can hear now.
func (c *conns) live(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return liveLocked(c.sessions[id], time.Now())
}

// forget drops session id (it ended).
func (c *conns) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.sessions[id]; st != nil {
		if st.expire != nil {
			st.expire.Stop()
		}
		delete(c.sessions, id)
	}
}

// guard is the Server's HTTP handler around mcp-go's.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(headerSessionID)
	if r.Method == http.MethodPost && id == "" {
		// An initialize or a 2026-07-28 request: the bound on sessions.
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method mcp.MCPMethod   `json:"method"`
		}
		if json.Unmarshal(body, &msg) == nil && (msg.Method == mcp.MethodInitialize || msg.Method == mcp.MethodSubscriptionsListen) {
			if !s.admit() {
				s.refuseSession(w, msg.ID)
				return
			}
			defer s.admitted()
		}
	}
	sw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	// Only sessions that initialized are tracked: an id a client made up
	// must not grow the table.
	known := id != "" && s.agents.has(id)
	if known {
		s.conns.begin(id)
		defer s.conns.end(id)
	}
	if r.Method != http.MethodGet {
		s.http.ServeHTTP(sw, r)
		return
	}
	if known {
		// Once mcp-go has answered the stream (its first flush), the
		// session's notifications may go out (legacySender): wake them.
		sw.opened = func() {
			s.conns.streamOpened(id)
			s.subs.wake(id)
		}
		defer func() {
			if sw.wasOpened() {
				s.conns.streamClosed(id)
			}
		}()
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.watch(id, sw, cancel, stop)
	}()
	s.http.ServeHTTP(sw, r.WithContext(ctx))
	close(stop)
	wg.Wait()
	if sw.failed() {
		if known {
			s.log.Info("MCP client stopped reading its stream; ending its session", "mcp_session", id)
			s.endSession(id)
		}
		// Close the connection too: net/http would keep a connection
		// whose reply it could not finish, and its buffers, for a next
		// request that a client that does not read will never send.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// watch cuts off the GET stream of session id when the session made no
// other request for staleAfter: its client does not read the pings. A
// stream of no session, or of one that never initialized (mcp-go opens
// one for any id), has nobody to answer and is cut after staleAfter.
func (s *Server) watch(id string, sw *deadlineWriter, cancel func(), stop <-chan struct{}) {
	tick := time.NewTicker(staleCheck)
	defer tick.Stop()
	opened := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			last := s.conns.lastSeen(id)
			if last.Before(opened) {
				last = opened
			}
			if now.Sub(last) >= staleAfter {
				sw.cut()
				cancel()
				return
			}
		}
	}
}

// endSession ends MCP session id as its client's DELETE would, through
// mcp-go, so its hooks run (subscriptions and presence go).
func (s *Server) endSession(id string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/mcp", nil)
	if err != nil {
		return
	}
	req.Header.Set(headerSessionID, id)
	s.http.ServeHTTP(discard{header: http.Header{}}, req)
	s.conns.forget(id)
}

// admit reserves a place for a new session or listen stream.
func (s *Server) admit() bool {
	s.admitMu.Lock()
	defer s.admitMu.Unlock()
	if s.agents.count()+s.admitting >= s.opts.MaxSessions {
		return false
	}
	s.admitting++
	return true
}

// admitted releases the reservation once the request is done (the session
// then counts among the agents, or failed).
func (s *Server) admitted() {
	s.admitMu.Lock()
	s.admitting--
	s.admitMu.Unlock()
}

func (s *Server) refuseSession(w http.ResponseWriter, id json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	msg := fmt.Sprintf("parley: too many MCP sessions (%d, the most [mcp] max_sessions allows): "+
		"end agents that are not needed (a session ends with DELETE, or when its client stops reading), "+
		"or raise [mcp] max_sessions (PARLEY_MCP_MAX_SESSIONS)", s.opts.MaxSessions)
	s.log.Warn("MCP session refused: too many", "max_sessions", s.opts.MaxSessions)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Retry-After", "30")
	w.WriteHeader(http.StatusServiceUnavailable)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
		"error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": msg}})
}

// deadlineWriter bounds every write of a response by writeTimeout and can
// be cut off, which fails the write in progress and every later one.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController

	// opened, when set, is called once, at the first flush of a 200
	// response: a GET stream is open.
	opened func()

	mu         sync.Mutex
	isCut      bool
	broken     bool // a write failed
	status     int  // the status written, 0 before
	openCalled bool
}

var errCut = errors.New("stream cut off: the client does not read it")

func (d *deadlineWriter) arm() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.isCut {
		return errCut
	}
	if err := d.rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// fail records a write that timed out: the client does not read. Other
// failures (the client closed the stream) end only the stream.
func (d *deadlineWriter) fail(err error) error {
	if errors.Is(err, errCut) || errors.Is(err, os.ErrDeadlineExceeded) {
		d.mu.Lock()
		d.broken = true
		d.mu.Unlock()
	}
	return err
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if err := d.arm(); err != nil {
		return 0, d.fail(err)
	}
	n, err := d.ResponseWriter.Write(p)
	return n, d.fail(err)
}

// WriteHeader records the status, for opened.
func (d *deadlineWriter) WriteHeader(code int) {
	d.mu.Lock()
	if d.status == 0 {
		d.status = code
	}
	d.mu.Unlock()
	d.ResponseWriter.WriteHeader(code)
}

// Flush implements http.Flusher (mcp-go streams only through one).
func (d *deadlineWriter) Flush() {
	if err := d.arm(); err != nil {
		d.fail(err)
		return
	}
	err := d.rc.Flush()
	d.fail(err)
	d.mu.Lock()
	call := err == nil && d.opened != nil && !d.openCalled && d.status == http.StatusOK
	if call {
		d.openCalled = true
	}
	d.mu.Unlock()
	if call {
		d.opened()
	}
}

// wasOpened reports whether opened was called.
func (d *deadlineWriter) wasOpened() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.openCalled
}

// Unwrap lets http.ResponseController reach the connection.
func (d *deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// cut fails the write in progress, if any, and every later one.
func (d *deadlineWriter) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.isCut, d.broken = true, true
	_ = d.rc.SetWriteDeadline(time.Now().Add(-time.Second))
}

func (d *deadlineWriter) failed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.broken
}

// discard is the ResponseWriter of endSession's request.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
func (d discard) WriteHeader(int)             {}
