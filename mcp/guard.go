package mcp

import (
	"bytes"
	"context"
	"crypto/subtle"
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

// ownClientHeader carries the secret that marks the daemon's own MCP
// client (OwnClientHeader).
const ownClientHeader = "Parley-Own-Client"

// OwnClientHeader is the header, name and value, that marks the daemon's
// own MCP client (cmd gives it to the orchestrator, which connects over
// loopback): its session is never the one ended to make room at [mcp]
// max_sessions, and it is admitted past the bound. The value is random,
// made by New, and must go nowhere but that client's requests: whoever
// sends it is taken for the daemon.
func (s *Server) OwnClientHeader() (name, value string) { return ownClientHeader, s.ownKey }

// isOwn reports whether r carries the own client's secret.
func (s *Server) isOwn(r *http.Request) bool {
	v := r.Header.Get(ownClientHeader)
	return v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.ownKey)) == 1
}

type ownKey struct{}

// ownFrom reports whether ctx is a request of the own client.
func ownFrom(ctx context.Context) bool { own, _ := ctx.Value(ownKey{}).(bool); return own }

// reservation is the place admit reserved for one initialize or listen
// request: released once its hook counted the session or stream among the
// agents, or when the request ends, so that a session is counted once.
type reservation struct {
	s    *Server
	once sync.Once
}

type reservationKey struct{}

// release gives the place back; it may be called more than once.
func (r *reservation) release() {
	if r != nil {
		r.once.Do(r.s.admitted)
	}
}

// reservationFrom is ctx's request's reservation, nil for none.
func reservationFrom(ctx context.Context) *reservation {
	r, _ := ctx.Value(reservationKey{}).(*reservation)
	return r
}

// initKey holds an initialize request's *initState.
type initKey struct{}

// initState is an initialize request's: the session id mcp-go made for it
// (made), and the one the initialize hook opened (id, once it succeeded).
type initState struct{ made, id string }

// guard is the Server's HTTP handler around mcp-go's: it fixes and checks
// the binding, bounds the sessions, tracks each session's requests and
// serves the 2025-11-25 GET stream.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) {
	modern := mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion))
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method mcp.MCPMethod   `json:"method"`
		Params struct {
			Meta struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"_meta"`
		} `json:"params"`
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "reading the request: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if json.Unmarshal(body, &msg) == nil && mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion) {
			modern = true
		}
	}
	own := s.isOwn(r)
	ctx := context.WithValue(r.Context(), ownKey{}, own)
	// mcp-go serves a 2026-07-28 request, and an initialize, whatever
	// session header it carries: neither is a request of that session.
	id := r.Header.Get(headerSessionID)
	if modern || msg.Method == mcp.MethodInitialize {
		id = ""
	}
	// The bound on sessions, by what the request is, never by a header
	// it may carry.
	if r.Method == http.MethodPost && (msg.Method == mcp.MethodInitialize || msg.Method == mcp.MethodSubscriptionsListen) {
		if !s.admit(own) {
			s.refuseSession(w, msg.ID)
			return
		}
		res := &reservation{s: s}
		defer res.release()
		ctx = context.WithValue(ctx, reservationKey{}, res)
	}
	b := s.requestBinding(r)
	if id != "" {
		fixed, ok := s.conns.binding(id)
		if !ok {
			if r.Method == http.MethodGet {
				http.Error(w, "parley: "+errNoSession.Error(), http.StatusNotFound)
				return
			}
			s.http.ServeHTTP(w, r) // mcp-go answers 404
			return
		}
		if !b.same(fixed) {
			s.refuseRebind(w, msg.ID, fixed, b)
			return
		}
	}
	ctx = context.WithValue(ctx, bindingKey{}, b)
	sw := &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w)}
	switch {
	case msg.Method == mcp.MethodInitialize:
		init := &initState{}
		defer func() {
			switch {
			case init.id != "":
				s.conns.end(init.id) // opened by the initialize hook, in flight until now
			case init.made != "":
				s.endSession(init.made) // the initialize failed; mcp-go registered it anyway
			}
		}()
		s.http.ServeHTTP(sw, r.WithContext(context.WithValue(ctx, initKey{}, init)))
		return
	case id == "" && r.Method == http.MethodGet && !modern:
		// "Servers that require a session ID SHOULD respond to requests
		// without an Mcp-Session-Id header (other than initialization)
		// with HTTP 400 Bad Request", and to an ended session's with 404:
		// https://modelcontextprotocol.io/specification/2025-11-25/basic/transports#session-management
		http.Error(w, "parley: a GET stream needs the Mcp-Session-Id of an initialized session", http.StatusBadRequest)
		return
	case id == "":
		s.http.ServeHTTP(sw, r.WithContext(ctx))
		return
	}
	if r.Method == http.MethodGet {
		s.serveStream(w, r.WithContext(ctx), id)
		return
	}
	if !s.conns.begin(id) {
		http.Error(w, "parley: "+errNoSession.Error(), http.StatusNotFound)
		return
	}
	defer s.conns.end(id)
	s.http.ServeHTTP(sw, r.WithContext(ctx))
	if sw.failed() {
		// The client does not read its replies either.
		s.endSession(id)
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	}
}

// endSession ends MCP session id as its client's DELETE would, through
// mcp-go, and drops what parley kept for it (as the unregister hook does:
// both may run).
func (s *Server) endSession(id string) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodDelete, "/mcp", nil)
	if err == nil {
		req.Header.Set(headerSessionID, id)
		s.http.ServeHTTP(discard{header: http.Header{}}, req)
	}
	s.forgetSession(id)
}

// forgetSession drops session id's subscriptions, agent and connection.
func (s *Server) forgetSession(id string) {
	s.subs.removeAll(id)
	s.agents.unregistered(id)
	s.conns.forget(id)
}

// endIdle ends session id, idle for idleTimeout with no stream.
func (s *Server) endIdle(id string) {
	s.log.Info("ending an MCP session that made no request and had no stream open", "mcp_session", id, "idle_for", idleTimeout)
	s.endSession(id)
}

// admit reserves a place for a new session or listen stream, ending the
// longest idle session at the bound; the own client is admitted anyway.
func (s *Server) admit(own bool) bool {
	s.admitMu.Lock()
	defer s.admitMu.Unlock()
	for s.agents.count()+s.admitting >= s.opts.MaxSessions {
		victim, idleFor := s.conns.victim()
		if victim == "" {
			if own {
				break
			}
			return false
		}
		s.log.Info("MCP sessions at [mcp] max_sessions: ending the one idle longest to make room",
			"mcp_session", victim, "idle_for", idleFor.Round(time.Millisecond), "max_sessions", s.opts.MaxSessions)
		s.endSession(victim)
	}
	s.admitting++
	return true
}

// admitted releases a reservation (reservation.release).
func (s *Server) admitted() {
	s.admitMu.Lock()
	s.admitting--
	s.admitMu.Unlock()
}

func (s *Server) refuseSession(w http.ResponseWriter, id json.RawMessage) {
	msg := fmt.Sprintf("parley: too many MCP sessions (%d, the most [mcp] max_sessions allows), and none idle to end: "+
		"end agents that are not needed (a session ends with DELETE, after %s without a request or stream, or when its client stops reading), "+
		"or raise [mcp] max_sessions (PARLEY_MCP_MAX_SESSIONS)", s.opts.MaxSessions, idleTimeout)
	s.log.Warn("MCP session refused: too many", "max_sessions", s.opts.MaxSessions)
	w.Header().Set("Retry-After", "30")
	writeRPCError(w, http.StatusServiceUnavailable, id, mcp.INTERNAL_ERROR, msg)
}

// refuseRebind answers a request that names another binding than its
// session's.
func (s *Server) refuseRebind(w http.ResponseWriter, id json.RawMessage, fixed, asked binding) {
	was := "unbound (all sessions)"
	if fixed.id != "" {
		was = fmt.Sprintf("bound to session %s by %s", fixed.id, fixed.source)
	}
	wants := "no session"
	switch {
	case asked.err != nil:
		wants = asked.err.Error()
	case asked.id != "":
		wants = fmt.Sprintf("session %s by %s", asked.id, asked.source)
	}
	s.log.Warn("MCP request refused: it names another session than its connection's", "bound", fixed.id, "asked", asked.id)
	writeRPCError(w, http.StatusForbidden, id, mcp.INVALID_REQUEST, fmt.Sprintf(
		"parley: this MCP connection was initialized %s, and a request cannot change that (this one names %s); "+
			"initialize a new connection with the URL or %s header of the session you want", was, wants, SessionHeader))
}

// writeRPCError writes a JSON-RPC error response with HTTP status code.
func writeRPCError(w http.ResponseWriter, code int, id json.RawMessage, rpcCode int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
		"error": map[string]any{"code": rpcCode, "message": msg}})
}

// deadlineWriter bounds every write of a response by writeTimeout and can
// be cut off, which fails the write in progress and every later one.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController

	mu     sync.Mutex
	isCut  bool
	broken bool // a write timed out, or the response was cut off
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

// Flush implements http.Flusher (mcp-go streams only through one).
func (d *deadlineWriter) Flush() { _ = d.flush() }

// flush sends what was written, within the deadline.
func (d *deadlineWriter) flush() error {
	if err := d.arm(); err != nil {
		return d.fail(err)
	}
	return d.fail(d.rc.Flush())
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
