package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

// markerVar names the variable the agent process gets a random value of
// (agentproc.NewMarker): everything it starts inherits it, which is how a
// later run finds what a crash left.
const markerVar = "PARLEY_ACP_RUN"

// stderrKeep is how much of the end of stderr an exit error quotes.
const stderrKeep = 2048

// agentProc is one running agent process and its conversations.
type agentProc struct {
	d   *Driver
	gen int // which of the driver's processes; prefixes permission ids

	ready    chan struct{} // closed when launch ended; then startErr is set
	startErr error
	// gone is closed once the process is gone and its watcher returned
	// (at once after a start that started no process): nothing of it
	// logs any more.
	gone chan struct{}

	proc    *agentproc.Proc
	c       *conn
	caps    capabilities
	workdir string

	mu     sync.Mutex
	convs  map[string]*conversation // attached, by session id
	opened map[string]bool          // sessions open on this process (not closed)
	ended  bool
	endErr error
	stderr []byte
}

func newAgentProc(d *Driver, gen int) *agentProc {
	return &agentProc{d: d, gen: gen, ready: make(chan struct{}), gone: make(chan struct{}),
		convs: map[string]*conversation{}, opened: map[string]bool{}}
}

func (p *agentProc) isEnded() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ended
}

func (p *agentProc) pidfile() string { return filepath.Join(p.d.opts.StateDir, "agent.pid") }
func (p *agentProc) tmpdir() string  { return filepath.Join(p.d.opts.StateDir, "tmp") }

// launch starts the process and does initialize; it sets startErr and
// closes ready. It waits until prev, the process before it, is gone: both
// have the same pidfile and TMPDIR.
func (p *agentProc) launch(prev *agentProc) {
	defer close(p.ready)
	if prev != nil {
		<-prev.ready
		<-prev.gone
	}
	p.startErr = p.start()
	if p.proc == nil {
		close(p.gone)
	}
}

func (p *agentProc) start() error {
	o := p.d.opts
	if !agentproc.Supported() {
		return &agent.Problem{Cause: "parley runs ACP agents only on Linux",
			Fix: "run parley on Linux"}
	}
	if o.StateDir == "" {
		return errors.New("acp: no StateDir")
	}
	wd, err := p.d.workdir()
	if err != nil {
		return err
	}
	p.workdir = wd
	if err := os.MkdirAll(o.StateDir, 0o700); err != nil {
		return fmt.Errorf("acp: state dir: %w", err)
	}
	p.reapLeftover()

	marker := agentproc.NewMarker(markerVar)
	cmd := exec.Command(o.Command, o.Args...)
	cmd.Dir = wd
	cmd.Env = p.env(marker)
	p.c = newConn(nil, p, p.d.log)
	p.c.lineRead = p.d.lineRead
	// The reader starts with the process but waits until the connection
	// can write too: a request it hands on may be answered at once.
	writable := make(chan struct{})
	proc, err := agentproc.Start(agentproc.Spec{
		Cmd: cmd, Pidfile: p.pidfile(), TmpDir: p.tmpdir(), Marker: marker,
		Stderr: stderrTail{p},
		Read: func(r io.Reader) {
			<-writable
			p.c.read(r)
		},
	})
	if err == nil {
		p.c.w = proc.Stdin
	}
	close(writable)
	if err != nil {
		return p.startProblem(err)
	}
	p.proc = proc
	go p.watch()
	p.d.log.Info("acp: started", "pid", proc.PID, "command", o.Command)
	if p.d.started != nil {
		p.d.started(proc.PID)
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.CallTimeout)
	defer cancel()
	if err := p.initialize(ctx); err != nil {
		return p.initProblem(err)
	}
	return nil
}

// initProblem stops the process whose initialize failed with err and says
// why it failed. A write that failed (the agent's stdin is closed: EPIPE)
// or an output that ended means the process is ending, whichever of the
// two came first; what it said is known only once it is reaped and its
// stderr drained, which Stop waits for, and its watcher is waited for so
// that nothing of it logs once the start returned.
func (p *agentProc) initProblem(err error) error {
	o := p.d.opts
	ended := p.c.closedErr() != nil || errors.Is(err, errWriteFailed)
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	p.proc.Stop()
	<-p.gone
	p.mu.Lock()
	tail := strings.TrimSpace(string(p.stderr))
	p.mu.Unlock()
	fix := "check " + p.d.commandKey() + " and the args beside it: they must start the agent " +
		"speaking ACP on stdin and stdout (OpenCode: opencode acp)"
	var perr *agent.Problem
	var rerr *rpcError
	switch {
	case errors.As(err, &perr):
		return err
	case errors.As(err, &rerr):
		// It answered: whatever it did next, it refused.
	case ended:
		werr := p.proc.ExitErr()
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		if tail != "" {
			werr = fmt.Errorf("%w: %s", werr, tail)
		}
		return &agent.Problem{Cause: fmt.Sprintf("the agent %s exited as it started", o.Name), Fix: fix, Err: werr}
	case errors.Is(err, context.DeadlineExceeded):
		return &agent.Problem{Cause: fmt.Sprintf("the agent %s did not answer ACP's initialize within %s", o.Name, o.CallTimeout),
			Fix: fix, Err: err}
	}
	return &agent.Problem{Cause: fmt.Sprintf("the agent %s refused ACP's initialize", o.Name), Fix: fix, Err: err}
}

// reapLeftover stops a process a crashed run of parley left in StateDir.
func (p *agentProc) reapLeftover() {
	rec, err := agentproc.ReadPidfile(p.pidfile())
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	if err == nil && agentproc.StopLeftover(rec, agentproc.StopGrace) {
		p.d.log.Info("acp: stopped a process left by a previous run", "pid", rec.PID)
	}
	os.Remove(p.pidfile())
	os.RemoveAll(p.tmpdir())
}

// env is the process's environment: the base without CLAUDE* (parley may
// itself run inside Claude Code, whose session must not leak into agents)
// and without what parley sets, then ExtraEnv, then TMPDIR, PWD and the
// marker. OpenCode 1.18.33 finds its project configuration (opencode.json)
// from $PWD, not from its working directory: PWD must be the workdir.
func (p *agentProc) env(marker string) []string {
	o := p.d.opts
	base := o.Env
	if base == nil {
		base = os.Environ()
	}
	ours := func(kv string) bool {
		return strings.HasPrefix(kv, "TMPDIR=") || strings.HasPrefix(kv, "PWD=") || strings.HasPrefix(kv, markerVar+"=")
	}
	env := make([]string, 0, len(base)+len(o.ExtraEnv)+3)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "CLAUDE") && !ours(kv) {
			env = append(env, kv)
		}
	}
	for _, kv := range o.ExtraEnv {
		if !ours(kv) {
			env = append(env, kv)
		}
	}
	return append(env, "TMPDIR="+p.tmpdir(), "PWD="+p.workdir, marker)
}

// commandKey is where people set the agent's command, for its Problems.
func (d *Driver) commandKey() string {
	if d.opts.CommandKey == "" {
		return "[agent] command (PARLEY_AGENT_COMMAND)"
	}
	return d.opts.CommandKey
}

// startProblem turns an error of starting the command into a Problem
// when people can fix it, naming Options.CommandKey.
func (p *agentProc) startProblem(err error) error {
	o := p.d.opts
	install := o.Install
	if install == "" {
		install = "install the agent"
	}
	key := p.d.commandKey()
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &agent.Problem{
			Cause: fmt.Sprintf("the agent command %q is not installed (not found on PATH)", o.Command),
			Fix:   install + ", or set " + key, Err: err,
		}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return &agent.Problem{
			Cause: fmt.Sprintf("the agent command %q cannot be run", o.Command),
			Fix:   "make it an executable ACP agent, or set " + key, Err: err,
		}
	}
	return fmt.Errorf("acp: start %s: %w", o.Command, err)
}

// watch ends the process's conversations once it exited and everything
// it left was stopped, then closes gone.
func (p *agentProc) watch() {
	defer close(p.gone)
	<-p.proc.Done()
	// The reader ended before Done; its answers still being written fail
	// at once on the closed stdin, and may log.
	p.c.replies.Wait()
	werr := p.proc.ExitErr()
	p.mu.Lock()
	stopped := p.ended
	tail := strings.TrimSpace(string(p.stderr))
	p.mu.Unlock()
	var err error
	if !stopped {
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		if tail != "" {
			werr = fmt.Errorf("%w: %s", werr, tail)
		}
		err = &agent.Problem{
			Cause: fmt.Sprintf("the agent %s stopped unexpectedly", p.d.opts.Name),
			Fix:   "send the message again: parley starts the agent again and continues the conversation",
			Err:   werr,
		}
		p.d.log.Warn("acp: the agent process exited", "pid", p.proc.PID, "err", werr)
	} else {
		p.d.log.Info("acp: the agent process stopped", "pid", p.proc.PID)
	}
	p.end(err)
}

// end marks the process ended and ends its conversations with err (nil
// after stop).
func (p *agentProc) end(err error) {
	p.mu.Lock()
	if p.endErr == nil {
		p.endErr = err
	}
	p.ended = true
	convs := p.convs
	p.convs = map[string]*conversation{}
	p.mu.Unlock()
	p.d.forget(p)
	for _, c := range convs {
		c.end(err)
	}
}

// stop ends the process and its conversations (Err nil), and returns once
// its watcher did: nothing of the process logs afterwards.
func (p *agentProc) stop() {
	if p.proc == nil {
		return
	}
	p.mu.Lock()
	p.ended = true
	p.mu.Unlock()
	p.proc.Stop()
	p.end(nil)
	<-p.gone
}

// stderrTail keeps the end of stderr for exit errors and logs each chunk.
type stderrTail struct{ p *agentProc }

func (s stderrTail) Write(b []byte) (int, error) {
	s.p.d.log.Debug("acp: stderr", "text", truncate(string(b), 1000))
	s.p.mu.Lock()
	s.p.stderr = append(s.p.stderr, b...)
	if over := len(s.p.stderr) - stderrKeep; over > 0 {
		s.p.stderr = append([]byte(nil), s.p.stderr[over:]...)
	}
	s.p.mu.Unlock()
	return len(b), nil
}

// attached returns the conversation of session id on this process.
func (p *agentProc) attached(id string) *conversation {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.convs[id]
}

// notification implements handler.
func (p *agentProc) notification(method string, params json.RawMessage) {
	if method != "session/update" {
		return
	}
	var n struct {
		SessionID string        `json:"sessionId"`
		Update    sessionUpdate `json:"update"`
	}
	if err := json.Unmarshal(params, &n); err != nil {
		p.d.log.Debug("acp: skipped a session/update", "err", err)
		return
	}
	if c := p.attached(n.SessionID); c != nil {
		c.update(n.Update)
	}
}

// request implements handler: session/request_permission is asked of
// people; everything else is refused. parley declares neither fs nor
// terminal (the agent reads, writes and runs commands itself, under its
// own permission rules), so fs/* and terminal/* are not offered.
func (p *agentProc) request(id json.RawMessage, method string, params json.RawMessage) {
	if method != "session/request_permission" {
		p.c.respondLater(id, nil, &rpcError{Code: codeMethodNotFound, Message: "parley does not offer " + method})
		return
	}
	var r permissionParams
	if err := json.Unmarshal(params, &r); err != nil {
		p.c.respondLater(id, nil, &rpcError{Code: codeInvalidParams, Message: err.Error()})
		return
	}
	if c := p.attached(r.SessionID); c == nil || !c.permission(id, r) {
		// Nobody can answer: the session is not open here.
		p.c.respondLater(id, cancelledOutcome, nil)
	}
}
