package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

const (
	// stopGrace is how long Stop lets the process group end on SIGTERM
	// before it sends SIGKILL.
	stopGrace = 3 * time.Second
	// drainGrace is how long stdout may stay open after claude exited and
	// its group was killed (a process that left the group may hold it).
	drainGrace = 2 * time.Second
	// answerTimeout bounds a write of Answer, which has no context.
	answerTimeout = 10 * time.Second
	// stderrKeep is how much of the end of stderr an exit error quotes.
	stderrKeep = 2048
)

// Process is one running Claude Code process. Its methods are safe for
// concurrent use.
type Process struct {
	r            *Runner
	key          string
	conversation string
	tmpdir       string
	marker       string
	// mcpConfig is written to mcpConfigPath before the process starts
	// (nil: none).
	mcpConfig []byte

	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	pgid   int

	events   chan Event
	queue    *agentproc.Queue[Event]
	done     chan struct{}
	stopping chan struct{}
	stopOnce sync.Once
	readDone chan struct{}

	wmu sync.Mutex // one line at a time on stdin

	mu             sync.Mutex
	pending        map[string]json.RawMessage      // can_use_tool request id → input
	waiting        map[string]chan controlResponse // parley's request id → its answer
	problem        *Problem
	noConversation bool
	stopped        bool
	err            error
	stderr         []byte

	nextID atomic.Int64
}

func newProcess(r *Runner, key, conversation string) *Process {
	return &Process{
		r: r, key: key, conversation: conversation, tmpdir: r.tmpdir(key), marker: agentproc.NewMarker(markerVar),
		events:   make(chan Event),
		queue:    agentproc.NewQueue[Event](),
		done:     make(chan struct{}),
		stopping: make(chan struct{}),
		readDone: make(chan struct{}),
		pending:  map[string]json.RawMessage{},
		waiting:  map[string]chan controlResponse{},
	}
}

func (p *Process) start(cmd *exec.Cmd, env []string) error {
	if err := os.RemoveAll(p.tmpdir); err != nil {
		return fmt.Errorf("claudecode: tmpdir: %w", err)
	}
	if err := os.MkdirAll(p.tmpdir, 0o700); err != nil {
		return fmt.Errorf("claudecode: tmpdir: %w", err)
	}
	if p.mcpConfig != nil {
		// It holds the session's credential: readable by this user only,
		// in a directory only this user can enter, gone with the TMPDIR.
		if err := os.WriteFile(p.mcpConfigPath(), p.mcpConfig, 0o600); err != nil {
			os.RemoveAll(p.tmpdir)
			return fmt.Errorf("claudecode: MCP configuration: %w", err)
		}
	}
	cmd.Env = env
	// Own pipes rather than exec's: stdout must be closable from this side
	// when a process that escaped the group keeps it open, and stdin
	// writes need deadlines.
	inR, inW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("claudecode: pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return fmt.Errorf("claudecode: pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, &stderrTail{p: p}
	cmd.WaitDelay = drainGrace
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		os.RemoveAll(p.tmpdir)
		return startProblem(p.r.opts.Command, p.r.opts.CommandKey, err)
	}
	p.cmd, p.stdin, p.stdout, p.pgid = cmd, inW, outR, cmd.Process.Pid
	// The pidfile is written before wait runs: until then the process,
	// even one that exited at once, is an unreaped zombie with a start
	// time, and wait's removal cannot come before the write.
	start, err := agentproc.ProcStart(p.pgid)
	if err == nil {
		err = p.r.writePidfile(p.key, agentproc.Record{PID: p.pgid, Start: start, Conversation: p.conversation, Marker: p.marker})
	}
	go p.read()
	go p.wait()
	go p.queue.Forward(p.events, p.stopping)
	if err != nil {
		// Without a pidfile a crash of parley would leave it unfound.
		p.Stop()
		return err
	}
	p.r.log.Info("claudecode: started", "key", p.key, "pid", p.pgid, "conversation", p.conversation)
	return nil
}

// mcpConfigPath is where the process's MCP configuration is, "" without
// one.
func (p *Process) mcpConfigPath() string {
	if p.mcpConfig == nil {
		return ""
	}
	return filepath.Join(p.tmpdir, "parley-mcp.json")
}

// Stop ends the process: it closes stdin, sends SIGTERM to the whole
// process group, SIGKILL after a short grace, waits for the exit and
// removes the pidfile and the TMPDIR. It can be called more than once and
// after the process exited on its own.
func (p *Process) Stop() error {
	p.stopOnce.Do(func() {
		p.mu.Lock()
		p.stopped = true
		p.mu.Unlock()
		close(p.stopping)
		// Not under wmu: closing unblocks a write stuck on a full pipe.
		p.stdin.Close()
		agentproc.SignalGroup(p.pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			agentproc.SignalGroup(p.pgid, syscall.SIGKILL)
		}
	})
	<-p.done
	return nil
}

// kill ends the process for a reason of its own (a Problem); Err reports
// the reason.
func (p *Process) kill() {
	agentproc.SignalGroup(p.pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			agentproc.SignalGroup(p.pgid, syscall.SIGKILL)
		}
	}()
}

// Done is closed when the process exited and Err says why; Events closes
// once the events still queued were read (or, after Stop, dropped).
func (p *Process) Done() <-chan struct{} { return p.done }

// Err says why the process exited, once Done or Events is closed (nil
// before): nil after Stop, ErrNoConversation for a --resume of an unknown
// id, a *Problem when parley can tell people what to do, or the exit
// status with the end of stderr.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// exitErr is Err for callers that know the process is done.
func (p *Process) exitErr() error {
	if err := p.Err(); err != nil {
		return err
	}
	return errors.New("the process was stopped")
}

// wait reaps the process. Once claude itself exited it kills what is left
// of its group while the zombie still holds the group id (so the kill
// cannot reach a stranger), and what it started elsewhere.
func (p *Process) wait() {
	agentproc.WaitExited(p.pgid)
	agentproc.SignalGroup(p.pgid, syscall.SIGKILL)
	// Its Bash commands run in sessions of their own: find them by marker.
	for range 3 {
		if len(agentproc.Marked(p.marker)) == 0 {
			break
		}
		agentproc.SignalMarked(p.marker, syscall.SIGKILL)
	}
	if p.stdout != nil {
		select {
		case <-p.readDone:
		case <-time.After(drainGrace):
			p.stdout.Close()
			<-p.readDone
		}
	}
	werr := p.cmd.Wait()
	if p.stdout != nil {
		p.stdout.Close()
	}
	p.stdin.Close()
	p.removeFiles()

	p.mu.Lock()
	switch {
	case p.problem != nil:
		p.err = p.problem
	case p.noConversation:
		p.err = ErrNoConversation
	case p.stopped:
		p.err = nil
	default:
		tail := strings.TrimSpace(string(p.stderr))
		if werr == nil {
			werr = errors.New("exit status 0")
		}
		p.err = fmt.Errorf("claudecode: claude exited: %w", werr)
		if tail != "" {
			p.err = fmt.Errorf("claudecode: claude exited: %w: %s", werr, tail)
		}
	}
	err := p.err
	p.mu.Unlock()
	p.r.forget(p)
	p.r.log.Info("claudecode: exited", "key", p.key, "pid", p.pgid, "err", err)
	// Closed only now, so a consumer that ranges over Events finds Err set.
	p.queue.Close()
	close(p.done)
}

// removeFiles removes the pidfile and the TMPDIR, unless the pidfile is no
// longer this process's: then a successor on the key owns both.
func (p *Process) removeFiles() {
	rec, err := agentproc.ReadPidfile(p.r.pidfile(p.key))
	if errors.Is(err, agentproc.ErrBadPidfile) || err == nil && rec.Marker != p.marker {
		return
	}
	os.Remove(p.r.pidfile(p.key))
	os.RemoveAll(p.tmpdir)
}
