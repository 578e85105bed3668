package acp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
)

// Defaults of Options.
const (
	// DefaultCallTimeout bounds initialize and the session calls. OpenCode
	// 1.18.33 took 2–21 s for initialize and 1.4–10 s for its first
	// session/new on 2 loaded cores.
	DefaultCallTimeout = 2 * time.Minute
	// DefaultIdleTimeout is how long the agent process runs on with no
	// conversation before it is stopped.
	DefaultIdleTimeout = 10 * time.Minute
)

// Options configure a Driver: one configured ACP agent.
type Options struct {
	// Name is the agent's name in what people read and in logs
	// ("opencode"); default: the command's base name.
	Name string
	// Command is the agent's ACP command, a path or a name looked up on
	// PATH; Args its arguments (OpenCode: "opencode" with ["acp"]).
	Command string
	Args    []string
	// Install says how to install the command, for the Problem of a
	// missing one ("install OpenCode: npm install -g opencode-ai").
	Install string
	// CommandKey is where people set Command, for the Problem of a
	// missing one ("[agents.codex] command (PARLEY_AGENTS_CODEX_COMMAND)");
	// default: [agent]'s.
	CommandKey string
	// Workdir is the process's working directory, its PWD and every
	// session's cwd; empty: parley's own.
	Workdir string
	// Env is the base environment (nil: os.Environ()), without any
	// CLAUDE* variable; ExtraEnv is appended ([agent] env).
	Env      []string
	ExtraEnv []string
	// StateDir holds the pidfile and the TMPDIR of the driver's process.
	// It must be the driver's own: another driver or Claude Code's Runner
	// reaping it would stop this one's process.
	StateDir string
	// CallTimeout bounds each call but session/prompt (initialize,
	// session/new, load, resume, close); 0: DefaultCallTimeout.
	CallTimeout time.Duration
	// IdleTimeout stops the process once no conversation used it for
	// that long; 0: DefaultIdleTimeout, negative: never.
	IdleTimeout time.Duration
	// Logger receives how the process runs and ends, and its stderr
	// (debug); nil discards.
	Logger *slog.Logger
}

// Driver runs one ACP agent: one process that serves every conversation
// of it, started by the first Start and again after a crash. It
// implements agent.Driver; its methods are safe for concurrent use.
type Driver struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	cur    *agentProc // the process running or starting, nil when none
	last   *agentProc // the latest process: the next waits until it is gone
	gen    int        // counts the processes started
	users  int        // conversations and Starts under way
	idle   *time.Timer
	closed bool

	// For tests: noResume loads a session even where the agent offers
	// session/resume; lineRead is told when a line of the agent's
	// output was read, before it is handled.
	noResume bool
	lineRead func(line []byte)
	// started, when set, is told the pid of each process once it
	// started, before initialize is written.
	started func(pid int)
}

var _ agent.Driver = (*Driver)(nil)

// New returns a Driver with opts; it starts nothing.
func New(opts Options) *Driver {
	if opts.Name == "" {
		opts.Name = filepath.Base(opts.Command)
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Driver{opts: opts, log: log.With("agent", opts.Name)}
}

// Start implements agent.Driver. It starts the agent's process when none
// runs (and reaps one a crashed parley left), then opens the conversation
// on it: session/new when req names none; for a conversation the agent
// gave before, the same session when this process still has it open, else
// session/resume, else session/load (whose replay of the history is not
// reported). It fails with agent.ErrNoConversation when the agent cannot
// continue the conversation: it has no record of it, or it offers neither
// resume nor load. Each call is bounded by Options.CallTimeout.
func (d *Driver) Start(ctx context.Context, req agent.StartRequest) (agent.Conversation, error) {
	// The conversation's use of the process starts here, so the process
	// is not stopped as idle under a Start; it ends with the conversation,
	// or with a failed Start.
	if err := d.acquire(); err != nil {
		return nil, err
	}
	release := sync.OnceFunc(d.release)
	p, err := d.process(ctx)
	if err != nil {
		release()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.CallTimeout)
	defer cancel()
	c, err := p.open(ctx, req, release)
	if err != nil {
		release()
		return nil, err
	}
	return c, nil
}

// Close stops the agent's process; its conversations end (Err nil), and
// Start fails from now on. It returns once the processes are gone and
// their watchers returned: nothing of them logs afterwards.
func (d *Driver) Close() error {
	d.mu.Lock()
	d.closed = true
	p, last := d.cur, d.last
	d.cur = nil
	if d.idle != nil {
		d.idle.Stop()
	}
	d.mu.Unlock()
	if p != nil {
		<-p.ready
		p.stop()
	}
	// The latest process may have ended on its own (no longer cur) with
	// its watcher still running; each process's launch waited for the
	// one before it to be gone.
	if last != nil {
		<-last.ready
		<-last.gone
	}
	return nil
}

var errClosed = errors.New("acp: the driver is closed")

// process returns the running process, or starts one. Starts share one
// launch; a caller whose ctx ends stops waiting, the launch goes on
// (bounded by CallTimeout) for the next.
func (d *Driver) process(ctx context.Context) (*agentProc, error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, errClosed
	}
	p := d.cur
	if p == nil || p.isEnded() {
		d.gen++
		p = newAgentProc(d, d.gen)
		prev := d.last
		d.cur, d.last = p, p
		go p.launch(prev)
	}
	d.mu.Unlock()
	select {
	case <-p.ready:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if p.startErr != nil {
		d.forget(p)
		return nil, p.startErr
	}
	return p, nil
}

// forget drops p as the current process once it failed or ended.
func (d *Driver) forget(p *agentProc) {
	d.mu.Lock()
	if d.cur == p {
		d.cur = nil
	}
	d.mu.Unlock()
}

// acquire counts a use of the process (a conversation, from the start of
// its Start), which keeps it from being stopped as idle.
func (d *Driver) acquire() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return errClosed
	}
	d.users++
	if d.idle != nil {
		d.idle.Stop()
		d.idle = nil
	}
	return nil
}

// release ends a use; the last one arms the idle stop.
func (d *Driver) release() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.users--
	if d.users > 0 || d.closed || d.opts.IdleTimeout < 0 {
		return
	}
	var t *time.Timer
	t = time.AfterFunc(d.opts.IdleTimeout, func() {
		d.mu.Lock()
		if d.idle != t || d.users > 0 {
			d.mu.Unlock()
			return
		}
		d.idle = nil
		p := d.cur
		d.cur = nil
		d.mu.Unlock()
		if p != nil {
			d.log.Info("acp: stopping the idle agent process", "idle", d.opts.IdleTimeout)
			<-p.ready
			p.stop()
		}
	})
	d.idle = t
}

// workdir is the sessions' cwd: ACP wants an absolute path.
func (d *Driver) workdir() (string, error) {
	dir := d.opts.Workdir
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("acp: working directory: %w", err)
		}
		dir = wd
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("acp: working directory: %w", err)
	}
	st, err := os.Stat(abs)
	if err == nil && !st.IsDir() {
		err = errors.New("not a directory")
	}
	if err != nil {
		return "", &agent.Problem{
			Cause: fmt.Sprintf("the agent's working directory %q cannot be used", dir),
			Fix:   "create it, or set [agent] workdir (PARLEY_AGENT_WORKDIR) to a directory that exists",
			Err:   err,
		}
	}
	return abs, nil
}
