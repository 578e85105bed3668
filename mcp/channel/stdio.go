package channel

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/mark3labs/mcp-go/server"
	parleymcp "github.com/parley-chat/parley/mcp"
)

// maxLine bounds one JSON-RPC message from Claude Code.
const maxLine = 16 << 20

// legacyVersions are the protocol versions the channel serves: those with
// the initialize handshake. Claude Code delivers channel events only on such
// a connection (see the package doc), so a 2026-07-28 request, the
// server/discover probe included, is refused with this list.
var legacyVersions = func() []string {
	var out []string
	for _, v := range mcp.ValidProtocolVersions {
		if !mcp.IsModernProtocol(v) {
			out = append(out, v)
		}
	}
	return out
}()

// stdio serves one MCP client (Claude Code) on newline-delimited JSON-RPC.
// It is its own loop around mcp-go's MCPServer rather than mcp-go's
// StdioServer for three reasons: the channel must know when a notification
// has been written (the watermark is saved after that), it must keep the
// connection on the initialize-era protocol, and StdioServer keeps its
// session in a package variable, so two could not run in one process.
type stdio struct {
	srv    *server.MCPServer
	settle time.Duration
	sess   *session

	outMu  sync.Mutex
	out    io.Writer
	failed error // the first write failure; guarded by outMu
	cancel context.CancelFunc

	initialized atomic.Bool
	listed      atomic.Bool
	readyOnce   sync.Once
	ready       chan struct{} // closed once the client can hear channel events

	wg sync.WaitGroup
}

func newStdio(srv *server.MCPServer, out io.Writer, settle time.Duration) *stdio {
	return &stdio{srv: srv, out: out, settle: settle, ready: make(chan struct{}),
		sess: &session{notes: make(chan mcp.JSONRPCNotification, 16)}}
}

// serve reads requests and notifications from in until it ends (nil) or
// ctx ends or stdout fails (an error). Requests run concurrently.
func (s *stdio) serve(ctx context.Context, in io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.outMu.Lock()
	s.cancel = cancel
	s.outMu.Unlock()
	if err := s.srv.RegisterSession(ctx, s.sess); err != nil {
		return fmt.Errorf("channel: %w", err)
	}
	defer s.srv.UnregisterSession(context.WithoutCancel(ctx), s.sess.SessionID())
	ctx = s.srv.WithContext(ctx, s.sess)

	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			select {
			case n := <-s.sess.notes:
				_ = s.write(n)
			case <-ctx.Done():
				return
			}
		}
	}()
	defer s.wg.Wait()
	defer cancel()

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- parleymcp.ReadLines(ctx, in, maxLine, lines) }()
	for {
		select {
		case line := <-lines:
			s.dispatch(ctx, line)
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("channel: reading stdin: %w", err)
			}
			return s.writeErr()
		case <-ctx.Done():
			if err := s.writeErr(); err != nil {
				return err
			}
			return nil
		}
	}
}

// envelope is any JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

func (s *stdio) dispatch(ctx context.Context, line []byte) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		_ = s.write(errorResponse(nil, mcp.PARSE_ERROR, "parley channel: not a JSON-RPC message: "+err.Error()))
		return
	}
	hasID := len(env.ID) > 0 && string(env.ID) != "null"
	switch {
	case env.Method == "":
		// A response: the channel sends Claude Code no requests.
	case hasID:
		if v := metaVersion(env.Params); mcp.IsModernProtocol(v) {
			// server/discover included: Claude Code and mcp-go's client
			// answer this error by falling back to initialize, while a
			// discover result (even one listing only older versions)
			// keeps mcp-go's client on 2026-07-28.
			e := mcp.UnsupportedProtocolVersionError{Version: v, Supported: legacyVersions}.JSONRPCError()
			_ = s.write(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": env.ID, "error": e.Error})
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if resp := s.srv.HandleMessage(ctx, line); resp != nil {
				if s.write(resp) == nil && env.Method == string(mcp.MethodToolsList) {
					s.listed.Store(true)
					s.checkReady(ctx)
				}
			}
		}()
	default:
		s.srv.HandleMessage(ctx, line)
		if env.Method == string(mcp.MethodNotificationInitialized) {
			s.initialized.Store(true)
			s.checkReady(ctx)
		}
	}
}

// checkReady opens the gate for channel events once the client has
// finished its handshake and listed the tools, plus the settle time. Claude
// Code installs its handler for notifications/claude/channel only after it
// has connected and fetched the server's tools; a channel event before that
// would be dropped unseen (an MCP client ignores notifications it has no
// handler for), so the first one waits.
func (s *stdio) checkReady(ctx context.Context) {
	if !s.initialized.Load() || !s.listed.Load() {
		return
	}
	s.readyOnce.Do(func() {
		go func() {
			t := time.NewTimer(s.settle)
			defer t.Stop()
			select {
			case <-t.C:
				close(s.ready)
			case <-ctx.Done():
			}
		}()
	})
}

// notify writes one notification to the client. It returns once the
// message is written to stdout, or the write's error.
func (s *stdio) notify(method string, params any) error {
	return s.write(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "method": method, "params": params})
}

// write sends one message on stdout, as one Write. A failing stdout ends
// serve: the client is gone.
func (s *stdio) write(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("channel: encoding a message: %w", err)
	}
	b = append(b, '\n')
	s.outMu.Lock()
	defer s.outMu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if _, err := s.out.Write(b); err != nil {
		s.failed = fmt.Errorf("channel: writing stdout: %w", err)
		if s.cancel != nil {
			s.cancel()
		}
		return s.failed
	}
	return nil
}

func (s *stdio) writeErr() error {
	s.outMu.Lock()
	defer s.outMu.Unlock()
	return s.failed
}

func errorResponse(id json.RawMessage, code int, msg string) map[string]any {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "error": map[string]any{"code": code, "message": msg}}
}

// metaVersion is the protocol version a 2026-07-28 request declares in
// params._meta, or "".
func metaVersion(params json.RawMessage) string {
	var w struct {
		Meta map[string]any `json:"_meta"`
	}
	if len(params) == 0 || json.Unmarshal(params, &w) != nil {
		return ""
	}
	v, _ := w.Meta[mcp.MetaKeyProtocolVersion].(string)
	return v
}

// session is the one client of a stdio connection, as mcp-go sees it.
type session struct {
	initialized atomic.Bool
	notes       chan mcp.JSONRPCNotification
}

func (s *session) Initialize()       { s.initialized.Store(true) }
func (s *session) Initialized() bool { return s.initialized.Load() }
func (s *session) NotificationChannel() chan<- mcp.JSONRPCNotification {
	return s.notes
}
func (s *session) SessionID() string { return "stdio" }
