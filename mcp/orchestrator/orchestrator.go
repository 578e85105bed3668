package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
)

// Agent is one agent sessions can run with: a driver of its protocol and
// what the orchestrator needs to know of it.
type Agent struct {
	// Driver starts the agent's conversations.
	Driver agent.Driver
	// Title is the agent as people read it in notices: "Claude Code".
	Title string
	// Kind is the agent's kind ("claude-code", "opencode"): a
	// conversation saved for another kind is not resumed with this one.
	Kind string
	// AskPermissions routes the agent's permission prompts to people as
	// approvals (permissions = "ask"); without it a prompt that arrives
	// anyway is denied, never allowed — unless AllowPermissions.
	AskPermissions bool
	// AllowPermissions, without AskPermissions, allows every permission
	// prompt of the agent's once, asking nobody, and records in the
	// call's ToolGroup that parley did so by its configuration: for
	// agents whose own settings leave their prompts to their client
	// (ACP agents, permissions = "allow"). Claude Code with permissions =
	// "allow" decides by its own settings and prompts for nothing; a
	// prompt that arrives anyway is denied (AllowPermissions false).
	AllowPermissions bool
}

// Options configure an Orchestrator.
type Options struct {
	// Endpoint is parley's own MCP endpoint, http://127.0.0.1:PORT/mcp.
	Endpoint string
	// Header is sent with every request (Authorization when [http] token
	// is set).
	Header http.Header
	// HTTPClient, when set, carries the MCP connection (nil: the
	// transport's own client).
	HTTPClient *http.Client
	// Agents are the agents sessions run with, by name; "" is the default
	// agent, of sessions that name none ([agent]).
	Agents map[string]Agent
	// Tools, when set, gives a session's agent parley's own MCP server,
	// bound to the session (agent.StartRequest.Tools).
	Tools func(session string) agent.Tools
	// MaxRunning bounds the conversations running at once, of every
	// agent together (default 4).
	MaxRunning int
	// IdleStop stops a process idle this long (default 10m); the next
	// message resumes its conversation.
	IdleStop time.Duration
	// APIDeadline interrupts a turn whose model gave no output this long
	// and tells people (default 3m).
	APIDeadline time.Duration
	// ApprovalTimeout is how long people have to decide on an approval
	// (default 10m, at most an hour); a timeout denies the call.
	ApprovalTimeout time.Duration
	// Leases, when several instances share the store, gives each
	// session's agent to one of them at a time: a worker acts only while
	// its instance holds the lease "session/<id>" (lease.go). Nil (one
	// instance, as on bbolt) runs every session here.
	Leases core.Leaser
	// Lease tunes the session leases; the zero value takes core's
	// timings (tests shorten them). Its Logger is the session's.
	Lease core.HoldOptions
	// Logger receives the orchestrator's log, scoped by the caller (nil:
	// discarded).
	Logger *slog.Logger
}

// Defaults and bounds.
const (
	DefaultMaxRunning      = 4
	DefaultIdleStop        = 10 * time.Minute
	DefaultAPIDeadline     = 3 * time.Minute
	DefaultApprovalTimeout = 10 * time.Minute
	maxApprovalTimeout     = time.Hour
)

// Orchestrator runs one agent conversation per parley session, with the
// session's agent, as an MCP client of parley's own server.
type Orchestrator struct {
	opts  Options
	log   *slog.Logger
	slots *slots
	// loads bounds the sessions that load their state at once (a scan
	// after a (re)connection wakes every open session).
	loads chan struct{}

	mu       sync.Mutex
	conn     *conn
	changed  chan struct{} // closed (and replaced) when conn changes
	workers  map[string]*worker
	runCtx   context.Context
	stopping bool
	wg       sync.WaitGroup
	scanReq  chan struct{}
}

// New checks opts and returns an Orchestrator; Run starts it.
func New(opts Options) (*Orchestrator, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("orchestrator: no MCP endpoint")
	}
	if _, ok := opts.Agents[""]; !ok {
		return nil, errors.New("orchestrator: no default agent")
	}
	for name, a := range opts.Agents {
		if a.Driver == nil {
			return nil, fmt.Errorf("orchestrator: agent %q has no driver", name)
		}
	}
	if opts.MaxRunning <= 0 {
		opts.MaxRunning = DefaultMaxRunning
	}
	if opts.IdleStop <= 0 {
		opts.IdleStop = DefaultIdleStop
	}
	if opts.APIDeadline <= 0 {
		opts.APIDeadline = DefaultAPIDeadline
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	opts.ApprovalTimeout = min(opts.ApprovalTimeout, maxApprovalTimeout)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Orchestrator{opts: opts, log: opts.Logger, slots: newSlots(opts.MaxRunning),
		loads: make(chan struct{}, 8), changed: make(chan struct{}), workers: map[string]*worker{},
		scanReq: make(chan struct{}, 1)}, nil
}

// Reconnection and liveness.
const (
	pingEvery   = 5 * time.Second
	callTimeout = 30 * time.Second
	minBackoff  = 100 * time.Millisecond
	maxBackoff  = 5 * time.Second
)

// Run connects to parley's MCP server and drives the sessions' agents until
// ctx ends. It reconnects while the server is not up yet or after it went
// away, catching up on every open session each time; on return every agent
// process is stopped. It returns nil when ctx ended.
func (o *Orchestrator) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	o.mu.Lock()
	o.runCtx, o.stopping = ctx, false
	o.mu.Unlock()
	defer func() {
		cancel()
		o.mu.Lock()
		o.stopping = true
		o.mu.Unlock()
		o.wg.Wait()
		o.setConn(nil)
	}()
	// Scans run on their own: their calls wait for a connection, which
	// this loop makes.
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-o.scanReq:
				if err := o.scan(ctx); err != nil && ctx.Err() == nil {
					o.log.Warn("listing the sessions failed", "err", err)
				}
			}
		}
	}()
	backoff, failing := minBackoff, false
	for ctx.Err() == nil {
		cn, err := o.connect(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if !failing {
				o.log.Warn("cannot reach parley's MCP server yet; retrying", "endpoint", o.opts.Endpoint, "err", err)
				failing = true
			}
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			backoff = min(2*backoff, maxBackoff)
			continue
		}
		if failing {
			o.log.Info("connected to parley's MCP server", "endpoint", o.opts.Endpoint)
		}
		backoff, failing = minBackoff, false
		o.setConn(cn)
		o.requestScan()
		o.watch(ctx, cn)
		o.setConn(nil)
		cn.close()
	}
	return nil
}

// watch keeps cn until it breaks or ctx ends: pings find a server that
// forgot the connection (it restarted).
func (o *Orchestrator) watch(ctx context.Context, cn *conn) {
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-cn.broken:
			o.log.Info("the MCP connection broke; reconnecting", "err", cn.err())
			return
		case <-tick.C:
			pctx, cancel := context.WithTimeout(ctx, callTimeout)
			err := cn.c.Ping(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				o.log.Info("the MCP server did not answer a ping; reconnecting", "err", err)
				return
			}
		}
	}
}

func (o *Orchestrator) requestScan() {
	select {
	case o.scanReq <- struct{}{}:
	default:
	}
}

// setConn makes cn the connection calls use (nil: none, calls wait).
func (o *Orchestrator) setConn(cn *conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.conn = cn
	close(o.changed)
	o.changed = make(chan struct{})
}

// current waits for a connection other than broken.
func (o *Orchestrator) current(ctx context.Context, broken *conn) (*conn, error) {
	for {
		o.mu.Lock()
		cn, changed := o.conn, o.changed
		o.mu.Unlock()
		if cn != nil && cn != broken {
			return cn, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// scan wakes every open session, so that what happened while nobody
// listened (a restart, an outage) is caught up on. A session a scan finds
// working or waiting gets its unfinished turn completed if nothing is
// pending (repair).
func (o *Orchestrator) scan(ctx context.Context) error {
	cursor := ""
	for {
		var page struct {
			Sessions []struct {
				ID     string `json:"id"`
				Status string `json:"status"`
			} `json:"sessions"`
			Next string `json:"next"`
		}
		args := map[string]any{"limit": 1000}
		if cursor != "" {
			args["cursor"] = cursor
		}
		if err := o.call(ctx, "session.list", args, &page); err != nil {
			return err
		}
		for _, s := range page.Sessions {
			if s.Status != "closed" {
				o.wake(s.ID, s.Status == "working" || s.Status == "waiting")
			}
		}
		if page.Next == "" {
			return nil
		}
		cursor = page.Next
	}
}

// wake tells session id's worker to read its inbox, starting one if none
// runs. repair applies to a worker it starts (see scan).
func (o *Orchestrator) wake(id string, repair bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopping || o.runCtx == nil || id == "" {
		return
	}
	w := o.workers[id]
	if w == nil {
		w = newWorker(o, id, repair)
		o.workers[id] = w
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			w.run(o.runCtx)
		}()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// retire forgets w unless it was woken meanwhile; a closed session's worker
// is forgotten whatever.
func (o *Orchestrator) retire(w *worker, force bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !force && len(w.wake) > 0 {
		return false
	}
	if o.workers[w.id] == w {
		delete(o.workers, w.id)
	}
	return true
}
