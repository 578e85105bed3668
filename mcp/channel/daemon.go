package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
	parleymcp "github.com/parley-chat/parley/mcp"
)

// daemon is the channel's MCP client of the running parley daemon: one
// Streamable HTTP connection at protocol 2025-11-25 with its GET stream
// open, bound to the channel's session once it is known and subscribed to
// that session's inbox. A call that fails in the transport (the daemon is
// down, or restarted and forgot the MCP session) drops the connection; the
// next call makes a new one, subscribed again.
type daemon struct {
	url, token, version string
	log                 *slog.Logger
	hints               chan struct{} // one pending "the inbox may have changed"
	life                context.Context

	connMu  sync.Mutex // held while connecting
	mu      sync.Mutex
	session core.SessionID
	c       *client.Client
	gen     int
	down    string // the failure last told, so that it is told once
}

func newDaemon(life context.Context, url, token, version string, log *slog.Logger) *daemon {
	return &daemon{life: life, url: url, token: token, version: version, log: log, hints: make(chan struct{}, 1)}
}

// bind makes later connections bound to session id.
func (d *daemon) bind(id core.SessionID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.session = id
	d.gen++
	if d.c != nil {
		_ = d.c.Close()
		d.c = nil
	}
}

// bound returns the channel's session, or "" before it is known.
func (d *daemon) bound() core.SessionID {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.session
}

func (d *daemon) hint() {
	select {
	case d.hints <- struct{}{}:
	default:
	}
}

// conn returns the connection, making one when there is none.
func (d *daemon) conn(ctx context.Context) (*client.Client, int, error) {
	d.mu.Lock()
	if d.c != nil {
		defer d.mu.Unlock()
		return d.c, d.gen, nil
	}
	d.mu.Unlock()
	// One connects at a time; the others then use its connection.
	d.connMu.Lock()
	defer d.connMu.Unlock()
	d.mu.Lock()
	if d.c != nil {
		defer d.mu.Unlock()
		return d.c, d.gen, nil
	}
	d.gen++
	gen, session := d.gen, d.session
	d.mu.Unlock()

	c, err := d.connect(ctx, session)
	if err != nil {
		return nil, 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen != gen {
		// bind or drop came in between: this connection is stale.
		_ = c.Close()
		return nil, 0, transport.NewError(errors.New("the connection changed while it was made"))
	}
	d.c = c
	// The new connection may have missed notifications: read again.
	d.hint()
	return c, gen, nil
}

// connect makes a connection: initialized, and subscribed to the inbox
// when bound to session.
func (d *daemon) connect(ctx context.Context, session core.SessionID) (*client.Client, error) {
	headers := map[string]string{}
	if d.token != "" {
		headers["Authorization"] = "Bearer " + d.token
	}
	if session != "" {
		headers[parleymcp.SessionHeader] = string(session)
	}
	tr, err := transport.NewStreamableHTTP(d.url,
		transport.WithContinuousListening(),
		transport.WithHTTPHeaders(headers),
		// The transport logs every retry of its GET stream in its own
		// words: detail for debugging. What a person must know, the
		// channel says itself (explain).
		transport.WithHTTPLogger(slog.New(parleymcp.DebugOnly(d.log.With("part", "upstream").Handler()))),
	)
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	// Start's context bounds the GET stream: the channel's whole life.
	if err := c.Start(d.life); err != nil {
		return nil, transport.NewError(err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationResourceUpdated {
			d.hint()
		}
	})
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: mcp.LATEST_LEGACY_PROTOCOL_VERSION,
		ClientInfo:      mcp.Implementation{Name: "parley-channel", Version: d.version},
	}}); err != nil {
		_ = c.Close()
		return nil, err
	}
	if session != "" {
		// Bound, ui://chat/inbox is the session's inbox alone.
		if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: parleymcp.InboxURI}}); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// drop closes the connection of generation gen, if it is still the current
// one, so that the next call connects again.
func (d *daemon) drop(gen int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil && d.gen == gen {
		_ = d.c.Close()
		d.c = nil
	}
}

// close ends the connection (and its MCP session on the daemon).
func (d *daemon) close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil {
		_ = d.c.Close()
		d.c = nil
	}
}

// toolError is a tool's refusal, meant for whoever called it.
type toolError string

func (e toolError) Error() string { return string(e) }

// call calls tool name once and decodes its JSON result into v (when not
// nil). A tool's refusal is a toolError; a transport failure drops the
// connection and is transient (see transient).
func (d *daemon) call(ctx context.Context, name string, args map[string]any, v any) error {
	c, gen, err := d.conn(ctx)
	if err != nil {
		return d.failed(err)
	}
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		if transient(err) {
			d.drop(gen)
		}
		return d.failed(err)
	}
	d.tell("")
	var text []string
	for _, ct := range res.Content {
		if t, ok := ct.(mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	out := strings.Join(text, "\n")
	if res.IsError {
		return toolError(out)
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		return fmt.Errorf("channel: %s answered %q: %w", name, out, err)
	}
	return nil
}

// failed tells a transport failure once and returns it.
func (d *daemon) failed(err error) error {
	if transient(err) {
		d.tell(d.explain(err))
	}
	return err
}

// transient reports whether err is a failure to reach the daemon (down,
// restarting, forgot the MCP session), as opposed to an answer.
func transient(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) || errors.Is(err, transport.ErrSessionTerminated) || errors.Is(err, syscall.ECONNREFUSED)
}

// retry runs f until it succeeds, fails with an answer (not transient), or
// ctx ends, waiting between attempts from 100 ms up to 2 s. Ended by ctx, it
// returns ctx's error with the last failure that was not ctx's doing, which
// is the one that says why the daemon could not be reached.
func retry(ctx context.Context, f func() error) error {
	wait := 100 * time.Millisecond
	var last error
	for {
		err := f()
		if err == nil || !transient(err) {
			return err
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		}
		wait = min(wait*2, 2*time.Second)
	}
}

// explain turns a failure to reach the daemon into what to do about it.
func (d *daemon) explain(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("no parley daemon answers at %s (connection refused): start it with `parley serve`, "+
			"or point `parley mcp --channel --url` (or [http] listen in the configuration) at the one that runs", d.url)
	case errors.Is(err, transport.ErrAuthorizationRequired), errors.Is(err, transport.ErrOAuthAuthorizationRequired):
		if d.token == "" {
			return fmt.Sprintf("the parley daemon at %s requires a token: pass `--token TOKEN` or set PARLEY_HTTP_TOKEN "+
				"to the daemon's [http] token", d.url)
		}
		return fmt.Sprintf("the parley daemon at %s refused the token: `--token` (or PARLEY_HTTP_TOKEN, or [http] token) "+
			"must be the daemon's [http] token", d.url)
	}
	return fmt.Sprintf("reaching the parley daemon at %s failed: %v", d.url, err)
}

// tell logs a failure once, until it changes; "" records a success.
func (d *daemon) tell(msg string) {
	d.mu.Lock()
	told := d.down == msg
	d.down = msg
	d.mu.Unlock()
	switch {
	case told:
	case msg == "":
		d.log.Info("connected to the parley daemon", "url", d.url)
	default:
		d.log.Error("parley channel: " + msg + " (retrying)")
	}
}
