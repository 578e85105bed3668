package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	parleymcp "github.com/parley-chat/parley/mcp"
)

// inboxURI is the inbox of every session on an unbound connection.
const inboxURI = "ui://chat/inbox"

// conn is one MCP connection (protocol 2025-11-25, with its GET stream for
// notifications) to parley's server.
type conn struct {
	c       *client.Client
	cancel  context.CancelFunc
	broken  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	lastErr error
}

// fail marks the connection broken, so that the supervisor replaces it.
func (cn *conn) fail(err error) {
	cn.mu.Lock()
	if cn.lastErr == nil {
		cn.lastErr = err
	}
	cn.mu.Unlock()
	cn.once.Do(func() { close(cn.broken) })
}

func (cn *conn) err() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.lastErr
}

func (cn *conn) close() {
	cn.fail(errors.New("closed"))
	cn.cancel()
	_ = cn.c.Close()
}

// connect opens a connection, initializes it and subscribes to the inbox of
// every session: from then on every session counts as listened to.
func (o *Orchestrator) connect(ctx context.Context) (*conn, error) {
	opts := []transport.StreamableHTTPCOption{
		transport.WithContinuousListening(),
		// The transport logs each retry of its GET stream in its own
		// words: debug detail. What matters, Run logs itself.
		transport.WithHTTPLogger(slog.New(parleymcp.DebugOnly(o.log.With("part", "transport").Handler()))),
	}
	if len(o.opts.Header) > 0 {
		h := map[string]string{}
		for k, v := range o.opts.Header {
			if len(v) > 0 {
				h[k] = v[0]
			}
		}
		opts = append(opts, transport.WithHTTPHeaders(h))
	}
	if o.opts.HTTPClient != nil {
		opts = append(opts, transport.WithHTTPBasicClient(o.opts.HTTPClient))
	}
	tr, err := transport.NewStreamableHTTP(o.opts.Endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cn := &conn{c: client.NewClient(tr), cancel: cancel, broken: make(chan struct{})}
	cn.c.OnNotification(o.notified)
	// Start's context bounds the GET stream: the connection's own.
	if err := cn.c.Start(cctx); err != nil {
		cancel()
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	ictx, icancel := context.WithTimeout(ctx, callTimeout)
	defer icancel()
	if _, err := cn.c.Initialize(ictx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ClientInfo: mcp.Implementation{Name: "parley-orchestrator", Version: "1"}}}); err != nil {
		cn.close()
		return nil, fmt.Errorf("orchestrator: initialize: %w", err)
	}
	// Subscribe is deprecated for 2026-07-28, which has no GET stream;
	// 2025-11-25, which continuous listening needs, subscribes this way.
	if err := cn.c.Subscribe(ictx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: inboxURI}}); err != nil {
		cn.close()
		return nil, fmt.Errorf("orchestrator: subscribe: %w", err)
	}
	return cn, nil
}

// notified wakes the sessions a notification names. A bare {uri} (the
// server's queue for us overflowed) asks for a scan of every session.
func (o *Orchestrator) notified(n mcp.JSONRPCNotification) {
	if n.Method != mcp.MethodNotificationResourceUpdated {
		return
	}
	b, err := json.Marshal(n.Params.AdditionalFields)
	if err != nil {
		return
	}
	var u struct {
		Messages []struct {
			SessionID string `json:"session_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &u); err != nil || len(u.Messages) == 0 {
		o.requestScan()
		return
	}
	seen := map[string]bool{}
	for _, m := range u.Messages {
		if !seen[m.SessionID] {
			seen[m.SessionID] = true
			o.wake(m.SessionID, false)
		}
	}
}

// toolError is a tool's refusal, in the tool's words.
type toolError struct {
	tool, msg string
}

func (e *toolError) Error() string { return e.tool + ": " + e.msg }

// Whether a call is retried on a new connection after the connection
// failed under it: only where a second call cannot do something twice.
var retried = map[string]bool{
	"chat_read_since": true, "agent.state": true, "session.output": true, "session.list": true,
	"ui.tool_call": true, "ui.tool_output": true, "chat.assistant.post": true, // by its idempotency_key
}

// call calls tool with args and decodes its JSON result into out (when not
// nil). A tool's refusal is a *toolError; a failed connection is replaced
// and, for tools in retried, the call made again on the new one.
func (o *Orchestrator) call(ctx context.Context, tool string, args map[string]any, out any) error {
	var broken *conn
	for {
		cn, err := o.current(ctx, broken)
		if err != nil {
			return fmt.Errorf("%s: %w", tool, err)
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		if tool == "ui.request_approval" {
			cancel()
			cctx, cancel = context.WithCancel(ctx) // waits for people, bounded by its timeout_s
		}
		res, err := cn.c.CallTool(cctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
		cancel()
		if err == nil {
			var text []string
			for _, c := range res.Content {
				if t, ok := c.(mcp.TextContent); ok {
					text = append(text, t.Text)
				}
			}
			if res.IsError {
				return &toolError{tool: tool, msg: strings.Join(text, "\n")}
			}
			if out != nil {
				if err := json.Unmarshal([]byte(strings.Join(text, "")), out); err != nil {
					return fmt.Errorf("%s: reading the result: %w", tool, err)
				}
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", tool, ctx.Err())
		}
		var te *transport.Error
		if !errors.As(err, &te) {
			return fmt.Errorf("%s: %w", tool, err)
		}
		cn.fail(err)
		broken = cn
		if !retried[tool] {
			return fmt.Errorf("%s: %w", tool, err)
		}
		o.log.Debug("retrying a call on a new connection", "tool", tool, "err", err)
	}
}
