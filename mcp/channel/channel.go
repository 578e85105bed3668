package channel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/core"
)

// Options configure Serve.
type Options struct {
	// URL is the daemon's MCP endpoint, e.g. http://127.0.0.1:8765/mcp.
	URL string
	// Token, when set, is sent as "Authorization: Bearer Token".
	Token string
	// Session is the parley session the channel is bound to. Empty, the
	// channel creates one (titled Title) when the daemon first answers.
	Session core.SessionID
	// Title is the title of a session the channel creates.
	Title string
	// ApprovalTimeout bounds how long people have to decide on a relayed
	// permission prompt; unanswered, Claude Code is told deny. Default 10
	// minutes, at most an hour (ui.request_approval's bound).
	ApprovalTimeout time.Duration
	// ReplyPatience is how long the reply tool keeps trying to reach a
	// daemon that is down or restarting before it tells Claude it failed;
	// default 30 s.
	ReplyPatience time.Duration
	// Resync is how often the inbox is read without a notification, which
	// also notices a daemon that restarted (mcp-go's Streamable HTTP client
	// says nothing when its GET stream ends for good); default 2 s.
	Resync time.Duration
	// Settle is how long after Claude Code's handshake and tools/list the
	// first channel event waits: Claude Code installs its handler for them
	// only then (see the package doc); default 1 s.
	Settle time.Duration
	// Version is reported as the server's version.
	Version string
	// OnSession, when set, is called once with the session the channel is
	// bound to (given or created).
	OnSession func(core.SessionID)
	// Logger receives the channel's diagnostics (never message contents);
	// nil discards them. stdout carries the protocol, so log to stderr.
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultApprovalTimeout = 10 * time.Minute
	maxApprovalTimeout     = time.Hour
	defaultResync          = 2 * time.Second
	defaultReplyPatience   = 30 * time.Second
	defaultSettle          = time.Second
)

// Serve is `parley mcp --channel`: it serves Claude Code on in and out
// (newline-delimited JSON-RPC) as a channel of one parley session, and is a
// client of the daemon at opts.URL. It returns nil when in ends or ctx
// ends, and an error when the channel cannot go on: stdout failed, or the
// daemon refused the session (unknown, or the binding is wrong).
func Serve(ctx context.Context, opts Options, in io.Reader, out io.Writer) error {
	if opts.URL == "" {
		return errors.New("channel: no daemon URL")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ApprovalTimeout <= 0 {
		opts.ApprovalTimeout = DefaultApprovalTimeout
	}
	opts.ApprovalTimeout = min(opts.ApprovalTimeout, maxApprovalTimeout)
	if opts.ReplyPatience <= 0 {
		opts.ReplyPatience = defaultReplyPatience
	}
	if opts.Resync <= 0 {
		opts.Resync = defaultResync
	}
	if opts.Settle <= 0 {
		opts.Settle = defaultSettle
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := newDaemon(ctx, opts.URL, opts.Token, opts.Version, log)
	defer d.close()

	srv := server.NewMCPServer("parley", opts.Version,
		server.WithToolCapabilities(false),
		server.WithExperimental(map[string]any{
			"claude/channel":            map[string]any{},
			"claude/channel/permission": map[string]any{},
		}),
		server.WithInstructions(instructions),
		server.WithRecovery(),
	)
	sio := newStdio(srv, out, opts.Settle)
	r := &relay{d: d, io: sio, log: log, timeout: opts.ApprovalTimeout, patience: opts.ReplyPatience, nonce: newNonce(), ctx: ctx}
	srv.AddTool(r.replyTool())
	srv.AddNotificationHandler(MethodPermissionRequest, r.onPermissionRequest)
	defer r.wg.Wait()

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	fatal := make(chan error, 1)
	wg.Go(func() {
		created, err := bindSession(ctx, d, opts)
		if err != nil {
			if ctx.Err() == nil {
				fatal <- err
				cancel()
			}
			return
		}
		p := &pump{d: d, io: sio, log: log, resync: opts.Resync, fresh: created}
		if err := p.run(ctx); err != nil && ctx.Err() == nil {
			fatal <- err
			cancel()
		}
	})
	err := sio.serve(ctx, in)
	cancel()
	wg.Wait()
	select {
	case ferr := <-fatal:
		return ferr
	default:
	}
	return err
}

// bindSession binds d to the session of opts, creating it (session.create
// on an unbound connection) when none is given. A daemon that is down is
// waited for; a refusal (an unknown session) is returned. created says the
// channel made the session.
func bindSession(ctx context.Context, d *daemon, opts Options) (created bool, err error) {
	id := opts.Session
	if id == "" {
		created = true
		var res struct {
			SessionID core.SessionID `json:"session_id"`
		}
		args := map[string]any{}
		if opts.Title != "" {
			args["title"] = opts.Title
		}
		if err := retry(ctx, func() error { return d.call(ctx, "session.create", args, &res) }); err != nil {
			return false, fmt.Errorf("channel: creating a session: %w", err)
		}
		id = res.SessionID
		opts.Logger.Info("created a session for this channel; pass --session to bind to it again", "session", id)
	}
	d.bind(id)
	// The first request checks the binding: an unknown session fails here.
	if err := retry(ctx, func() error {
		_, _, err := d.conn(ctx)
		return err
	}); err != nil {
		return false, fmt.Errorf("channel: binding to session %s: %w", id, err)
	}
	opts.Logger.Info("channel bound to a parley session", "session", id)
	if opts.OnSession != nil {
		opts.OnSession(id)
	}
	return created, nil
}

// instructions are added to Claude's system prompt (the channels
// reference recommends saying how events arrive and how to answer).
const instructions = `This server is a channel of a parley session: people write to you from a chat (Telegram, Slack, Matrix or parley's web page).
Their messages arrive as <channel source="..." session_id="..." message_id="..." origin="..." author="..." ts="..." kind="message">text</channel>: origin is the platform, author the person.
They do not see this terminal. Everything they should read must go through the reply tool (reply {text}, Markdown); each call is one message that notifies them, so reply when you have something to say or finished, not for every step.
kind="control" events are the person's commands: /cancel asks you to stop what you are doing, /close means the session is closed and replies are refused.
Files people attach are listed with their paths on this machine. When you ask for permission to use a tool, the people may approve or deny it from the chat too.`
