package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ProxyOptions configure Proxy.
type ProxyOptions struct {
	// URL is the daemon's MCP endpoint, e.g. http://127.0.0.1:8765/mcp.
	URL string
	// Token, when set, is sent as "Authorization: Bearer Token".
	Token string
	// Session, when set, binds the connection to that session (it is sent
	// as the Parley-Session header).
	Session string
	// AgentToken, when set, is an agent's credential (AgentTokenHeader),
	// sent instead of Token: the agent parley runs reaches its session
	// through the proxy with what it was given, and nothing more.
	AgentToken string
	// Logger receives the relay's diagnostics (never message contents);
	// nil discards them. stdout carries the protocol, so log to stderr.
	Logger *slog.Logger
}

// maxLine bounds one JSON-RPC message on stdin.
const maxLine = 64 << 20

// Proxy is `parley mcp`: it serves MCP over stdio (newline-delimited
// JSON-RPC on in and out) by relaying every message to the daemon's
// Streamable HTTP endpoint, and the daemon's notifications and requests
// back. It returns nil when in ends, or ctx's error when ctx ends first.
func Proxy(ctx context.Context, opts ProxyOptions, in io.Reader, out io.Writer) error {
	if opts.URL == "" {
		return errors.New("mcp proxy: no daemon URL")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	headers := map[string]string{}
	switch {
	case opts.AgentToken != "":
		headers[AgentTokenHeader] = opts.AgentToken
	case opts.Token != "":
		headers["Authorization"] = "Bearer " + opts.Token
	}
	if opts.Session != "" {
		headers[SessionHeader] = opts.Session
	}
	up, err := transport.NewStreamableHTTP(opts.URL,
		transport.WithContinuousListening(), // the GET stream, for 2025-11-25 clients
		transport.WithHTTPHeaders(headers),
		// The transport logs every retry of the GET stream (once a second
		// while the daemon is down) in its own words: debug detail. What
		// a person must know, the relay says itself (explain).
		transport.WithHTTPLogger(slog.New(DebugOnly(opts.Logger.With("part", "upstream").Handler()))),
	)
	if err != nil {
		return fmt.Errorf("mcp proxy: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	p := &proxy{url: opts.URL, token: opts.Token != "", log: opts.Logger, up: up, out: out, cancel: cancel,
		inflight: map[string]context.CancelFunc{}, serverReqs: map[string]chan json.RawMessage{},
		subscribed: map[string]bool{}, notes: make(chan []byte, 256)}
	if err := up.Start(ctx); err != nil {
		return fmt.Errorf("mcp proxy: %w", err)
	}
	up.SetNotificationHandler(func(n mcp.JSONRPCNotification) { p.write(n) })
	up.SetRequestHandler(p.serverRequest)
	defer up.Close() // ends the daemon-side session (DELETE)

	lines := make(chan []byte)
	readErr := make(chan error, 1)
	go func() { readErr <- ReadLines(ctx, in, maxLine, lines) }()
	p.wg.Add(1)
	go func() { defer p.wg.Done(); p.forwardNotifications(ctx) }()
	defer p.wg.Wait()
	defer cancel()
	for {
		select {
		case line := <-lines:
			p.dispatch(ctx, line)
		case err := <-readErr:
			if err != nil {
				return fmt.Errorf("mcp proxy: reading stdin: %w", err)
			}
			return nil
		case <-ctx.Done():
			p.outMu.Lock()
			err := p.fatal
			p.outMu.Unlock()
			if err != nil {
				return err
			}
			return ctx.Err()
		}
	}
}

// proxy relays one stdio client. It keeps the few things a relay must know
// about the protocol: which request to cancel, which server request a
// response answers, and, for 2025-11-25, the initialize parameters and the
// subscriptions to replay when a restarted daemon has forgotten the
// session.
type proxy struct {
	url    string
	token  bool // a token is sent
	log    *slog.Logger
	up     *transport.StreamableHTTP
	cancel context.CancelFunc
	fatal  error // set before cancel when stdout fails; guarded by outMu
	wg     sync.WaitGroup

	outMu sync.Mutex
	out   io.Writer

	mu         sync.Mutex
	inflight   map[string]context.CancelFunc   // client request id → cancel
	serverReqs map[string]chan json.RawMessage // server request id → its response
	initParams json.RawMessage                 // the client's initialize params
	version    string                          // the protocol version in effect
	subscribed map[string]bool                 // URIs subscribed with resources/subscribe
	reinitMu   sync.Mutex
	generation int // counts (re)initializations
	// initDone is closed when the latest initialize request has its
	// answer: the client's notifications/initialized and requests must not
	// overtake it, or they reach the daemon without the session.
	initDone chan struct{}
	// down is the last relay failure told on stderr, so that a daemon
	// that is down is told once, not for every message.
	down string

	notes chan []byte // client notifications, forwarded in order
}

// envelope is any JSON-RPC message.
type envelope struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

func (p *proxy) dispatch(ctx context.Context, line []byte) {
	var env envelope
	if err := json.Unmarshal(line, &env); err != nil {
		p.write(errorResponse(nil, mcp.PARSE_ERROR, "parley mcp: not a JSON-RPC message: "+err.Error()))
		return
	}
	hasID := len(env.ID) > 0 && string(env.ID) != "null"
	switch {
	case env.Method != "" && hasID:
		// Requests run concurrently, except that nothing overtakes an
		// initialize: without its session they would be refused.
		p.mu.Lock()
		gate, done := p.initDone, chan struct{}(nil)
		if env.Method == string(mcp.MethodInitialize) {
			done = make(chan struct{})
			p.initDone = done
		}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if done != nil {
				defer close(done)
			} else if gate != nil {
				select {
				case <-gate:
				case <-ctx.Done():
					return
				}
			}
			p.request(ctx, env)
		}()
	case env.Method != "":
		select {
		case p.notes <- line:
		case <-ctx.Done():
		}
	case hasID:
		p.mu.Lock()
		ch := p.serverReqs[string(env.ID)]
		delete(p.serverReqs, string(env.ID))
		p.mu.Unlock()
		if ch != nil {
			ch <- line
		}
	}
}

func errorResponse(id json.RawMessage, code int, msg string) map[string]any {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}}
}

// request relays one client request and writes its response.
func (p *proxy) request(ctx context.Context, env envelope) {
	var rid mcp.RequestId
	if err := json.Unmarshal(env.ID, &rid); err != nil {
		p.write(errorResponse(env.ID, mcp.INVALID_REQUEST, "parley mcp: bad request id"))
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	key := string(env.ID)
	p.mu.Lock()
	p.inflight[key] = cancel
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.inflight, key)
		p.mu.Unlock()
		cancel()
	}()

	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: rid, Method: env.Method}
	if len(env.Params) > 0 {
		req.Params = env.Params
	}
	if v := metaVersion(env.Params); mcp.IsModernProtocol(v) {
		// 2026-07-28 is stateless: the version travels with each request,
		// and over HTTP the method and name in headers as well.
		p.setVersion(v)
		req.Header = make(map[string][]string)
		for k, val := range mcp.StandardHeaders(v, mcp.MCPMethod(env.Method), env.Params) {
			req.Header.Set(k, val)
		}
	}
	p.mu.Lock()
	gen := p.generation
	p.mu.Unlock()
	resp, err := p.up.SendRequest(ctx, req)
	if errors.Is(err, transport.ErrSessionTerminated) && env.Method != string(mcp.MethodInitialize) {
		if rerr := p.reinitialize(ctx, gen); rerr != nil {
			err = fmt.Errorf("%w (and initializing again failed: %v)", err, rerr)
		} else {
			resp, err = p.up.SendRequest(ctx, req)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return // cancelled by the client: no response is expected
		}
		msg := p.explain(err)
		p.tell(msg)
		p.write(errorResponse(env.ID, mcp.INTERNAL_ERROR, "parley mcp: "+msg))
		return
	}
	p.tell("")
	if resp.Error == nil {
		p.remember(env, resp)
	}
	p.write(resp)
}

// remember records what a restarted daemon would have to be told again.
func (p *proxy) remember(env envelope, resp *transport.JSONRPCResponse) {
	var uri struct {
		URI string `json:"uri"`
	}
	switch mcp.MCPMethod(env.Method) {
	case mcp.MethodInitialize:
		var res struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(resp.Result, &res)
		p.mu.Lock()
		p.initParams = env.Params
		p.generation++
		p.mu.Unlock()
		if res.ProtocolVersion != "" {
			p.setVersion(res.ProtocolVersion)
		}
	case mcp.MethodResourcesSubscribe:
		if json.Unmarshal(env.Params, &uri) == nil {
			p.mu.Lock()
			p.subscribed[uri.URI] = true
			p.mu.Unlock()
		}
	case mcp.MethodResourcesUnsubscribe:
		if json.Unmarshal(env.Params, &uri) == nil {
			p.mu.Lock()
			delete(p.subscribed, uri.URI)
			p.mu.Unlock()
		}
	}
}

func (p *proxy) setVersion(v string) {
	p.mu.Lock()
	changed := p.version != v
	p.version = v
	p.mu.Unlock()
	if changed {
		p.up.SetProtocolVersion(v)
	}
}

// reinitialize starts a new daemon-side session after the daemon answered
// 404 for the old one (it restarted, or the session idled out): the
// client's initialize again, then its subscriptions. gen is the generation
// the failed request saw; a concurrent caller that already re-initialized
// makes this a no-op.
func (p *proxy) reinitialize(ctx context.Context, gen int) error {
	p.reinitMu.Lock()
	defer p.reinitMu.Unlock()
	p.mu.Lock()
	params, current := p.initParams, p.generation
	uris := make([]string, 0, len(p.subscribed))
	for u := range p.subscribed {
		uris = append(uris, u)
	}
	p.mu.Unlock()
	if current != gen {
		return nil
	}
	if params == nil {
		return errors.New("the client never initialized")
	}
	p.log.Info("the daemon forgot this MCP session (restarted?); initializing again", "subscriptions", len(uris))
	resp, err := p.up.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
		ID: mcp.NewRequestId(fmt.Sprintf("parley-proxy-init-%d", gen+1)), Method: string(mcp.MethodInitialize), Params: params})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return errors.New(resp.Error.Message)
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(resp.Result, &res)
	if res.ProtocolVersion != "" {
		p.setVersion(res.ProtocolVersion)
	}
	p.mu.Lock()
	p.generation++
	p.mu.Unlock()
	if err := p.up.SendNotification(ctx, mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationInitialized)}}); err != nil {
		return err
	}
	for i, u := range uris {
		if _, err := p.up.SendRequest(ctx, transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION,
			ID: mcp.NewRequestId(fmt.Sprintf("parley-proxy-sub-%d-%d", gen+1, i)), Method: string(mcp.MethodResourcesSubscribe),
			Params: map[string]string{"uri": u}}); err != nil {
			return err
		}
	}
	return nil
}

// forwardNotifications relays the client's notifications in order. A
// cancellation also cancels the relayed request, which ends a
// subscriptions/listen stream.
func (p *proxy) forwardNotifications(ctx context.Context) {
	for {
		var line []byte
		select {
		case line = <-p.notes:
		case <-ctx.Done():
			return
		}
		p.mu.Lock()
		initDone := p.initDone
		p.mu.Unlock()
		if initDone != nil {
			select {
			case <-initDone:
			case <-ctx.Done():
				return
			}
		}
		var n mcp.JSONRPCNotification
		if err := json.Unmarshal(line, &n); err != nil {
			p.log.Warn("dropping a malformed notification from the client", "err", err)
			continue
		}
		if n.Method == string(mcp.MethodNotificationCancelled) {
			// Ending the relayed HTTP request ends the request in the
			// daemon too, in both protocol generations.
			if id, ok := n.Params.AdditionalFields["requestId"]; ok {
				b, _ := json.Marshal(id)
				p.mu.Lock()
				cancel := p.inflight[string(b)]
				p.mu.Unlock()
				if cancel != nil {
					cancel()
					continue
				}
			}
		}
		if err := p.up.SendNotification(ctx, n); err != nil && ctx.Err() == nil {
			p.log.Debug("relaying a notification to the daemon failed", "method", n.Method, "err", err)
			p.tell(p.explain(err))
		}
	}
}

// serverRequest relays a request from the daemon to the client and waits
// for its answer. Pings (the daemon's heartbeat) are answered here.
func (p *proxy) serverRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if req.Method == string(mcp.MethodPing) {
		return &transport.JSONRPCResponse{JSONRPC: mcp.JSONRPC_VERSION, ID: req.ID, Result: json.RawMessage("{}")}, nil
	}
	id, err := json.Marshal(req.ID)
	if err != nil {
		return nil, err
	}
	ch := make(chan json.RawMessage, 1)
	p.mu.Lock()
	p.serverReqs[string(id)] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.serverReqs, string(id))
		p.mu.Unlock()
	}()
	p.write(req)
	select {
	case raw := <-ch:
		var resp transport.JSONRPCResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			return nil, fmt.Errorf("the client's response: %w", err)
		}
		return &resp, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// write sends one message to the client. A failing stdout ends the proxy.
func (p *proxy) write(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.log.Error("cannot encode a message for the client", "err", err)
		return
	}
	b = append(b, '\n')
	p.outMu.Lock()
	defer p.outMu.Unlock()
	if p.fatal != nil {
		return
	}
	if _, err := p.out.Write(b); err != nil {
		p.fatal = fmt.Errorf("mcp proxy: writing stdout: %w", err)
		p.cancel()
	}
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

// explain turns a relay failure into what to do about it.
func (p *proxy) explain(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("no parley daemon answers at %s (connection refused): start it with `parley serve`, "+
			"or point `parley mcp --url` (or [http] listen in the configuration) at the one that runs", p.url)
	case errors.Is(err, transport.ErrAuthorizationRequired), errors.Is(err, transport.ErrOAuthAuthorizationRequired):
		if !p.token {
			return fmt.Sprintf("the parley daemon at %s requires a token: pass `parley mcp --token TOKEN` or set "+
				"PARLEY_HTTP_TOKEN to the daemon's [http] token", p.url)
		}
		return fmt.Sprintf("the parley daemon at %s refused the token: `parley mcp --token` (or PARLEY_HTTP_TOKEN, "+
			"or [http] token in the configuration) must be the daemon's [http] token", p.url)
	case errors.Is(err, transport.ErrLegacySSEServer):
		return fmt.Sprintf("%s refused to start an MCP session (an HTTP 4xx): is it parley's /mcp endpoint? "+
			"`parley mcp --url` should be http://HOST:PORT/mcp of a running `parley serve`", p.url)
	}
	return fmt.Sprintf("relaying to the parley daemon at %s failed: %v", p.url, err)
}

// tell writes a relay failure to the log (stderr) once, until it changes;
// "" records a success, so the next failure is told again.
func (p *proxy) tell(msg string) {
	p.mu.Lock()
	told := p.down == msg
	p.down = msg
	p.mu.Unlock()
	if !told && msg != "" {
		p.log.Error("parley mcp: " + msg)
	}
}
