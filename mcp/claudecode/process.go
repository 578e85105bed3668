package claudecode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
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

	cmd    *exec.Cmd
	stdin  *os.File
	stdout *os.File
	pgid   int

	events   chan Event
	queue    eventQueue
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
		r: r, key: key, conversation: conversation, tmpdir: r.tmpdir(key), marker: newMarker(),
		events:   make(chan Event),
		queue:    eventQueue{ready: make(chan struct{}, 1)},
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
		return startProblem(p.r.opts.Command, err)
	}
	p.cmd, p.stdin, p.stdout, p.pgid = cmd, inW, outR, cmd.Process.Pid
	go p.read()
	go p.wait()
	go p.forward()
	start, err := procStart(p.pgid)
	if err == nil {
		err = p.r.writePidfile(p.key, pidRecord{PID: p.pgid, Start: start, Conversation: p.conversation, Marker: p.marker})
	}
	if err != nil {
		// Without a pidfile a crash of parley would leave it unfound.
		p.Stop()
		return err
	}
	p.r.log.Info("claudecode: started", "key", p.key, "pid", p.pgid, "conversation", p.conversation)
	return nil
}

// initialize does the control protocol's handshake. Claude Code answers it
// only once it has loaded the conversation, so an unknown --resume id
// shows here as an exit, before any turn.
func (p *Process) initialize(ctx context.Context) error {
	_, err := p.request(ctx, map[string]any{"subtype": "initialize"})
	return err
}

// Send writes one user turn on stdin. Claude Code queues a turn sent while
// another runs and starts it when that one ended.
func (p *Process) Send(ctx context.Context, text string) error {
	return p.write(ctx, map[string]any{
		"type":    "user",
		"message": map[string]any{"role": "user", "content": text},
	})
}

// Events returns the process's events in order; it is closed after the
// process exited, when Err already says why. Events wait in memory until
// read, so stdout is always read on (an Interrupt is acknowledged even
// while nobody reads); after Stop the unread ones are dropped.
func (p *Process) Events() <-chan Event { return p.events }

// Answer answers the PermissionRequest requestID with d. It fails when the
// request is unknown or already answered, or the process is gone.
func (p *Process) Answer(requestID string, d Decision) error {
	p.mu.Lock()
	input, ok := p.pending[requestID]
	delete(p.pending, requestID)
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("claudecode: no open permission request %q", requestID)
	}
	var behaviour map[string]any
	if d.Allow {
		in := d.UpdatedInput
		if len(in) == 0 {
			in = input
		}
		behaviour = map[string]any{"behavior": "allow", "updatedInput": in}
	} else {
		msg := d.Message
		if msg == "" {
			msg = "The person denied this call."
		}
		behaviour = map[string]any{"behavior": "deny", "message": msg}
		if d.Interrupt {
			behaviour["interrupt"] = true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), answerTimeout)
	defer cancel()
	return p.write(ctx, map[string]any{
		"type": "control_response",
		"response": map[string]any{
			"subtype": "success", "request_id": requestID, "response": behaviour,
		},
	})
}

// Interrupt asks Claude Code to end the running turn and waits for its
// acknowledgement; the turn then ends with a Result (TerminalReason
// "aborted_streaming" when it was streaming). Without a running turn it is
// acknowledged and does nothing.
func (p *Process) Interrupt(ctx context.Context) error {
	_, err := p.request(ctx, map[string]any{"subtype": "interrupt"})
	return err
}

// request sends a control_request and waits for its control_response.
func (p *Process) request(ctx context.Context, req map[string]any) (controlResponse, error) {
	id := fmt.Sprintf("parley-%d", p.nextID.Add(1))
	ch := make(chan controlResponse, 1)
	p.mu.Lock()
	p.waiting[id] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, id)
		p.mu.Unlock()
	}()
	if err := p.write(ctx, map[string]any{"type": "control_request", "request_id": id, "request": req}); err != nil {
		return controlResponse{}, err
	}
	select {
	case r := <-ch:
		if r.Error != "" {
			return r, fmt.Errorf("claudecode: %s: %s", req["subtype"], r.Error)
		}
		return r, nil
	case <-p.done:
		return controlResponse{}, fmt.Errorf("claudecode: %s: %w", req["subtype"], p.exitErr())
	case <-ctx.Done():
		return controlResponse{}, fmt.Errorf("claudecode: %s: %w", req["subtype"], ctx.Err())
	}
}

// write puts one JSON line on stdin; ctx bounds a write that blocks
// because Claude Code does not read.
func (p *Process) write(ctx context.Context, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("claudecode: %w", err)
	}
	b = append(b, '\n')
	p.wmu.Lock()
	defer p.wmu.Unlock()
	select {
	case <-p.done:
		return fmt.Errorf("claudecode: write: %w", p.exitErr())
	case <-p.stopping:
		return errors.New("claudecode: write: the process is stopping")
	default:
	}
	if dl, ok := ctx.Deadline(); ok {
		p.stdin.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { p.stdin.SetWriteDeadline(time.Unix(1, 0)) })
	_, err = p.stdin.Write(b)
	stop()
	p.stdin.SetWriteDeadline(time.Time{})
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("claudecode: write: %w", ctx.Err())
		}
		return fmt.Errorf("claudecode: write: %w", err)
	}
	return nil
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
		syscall.Kill(-p.pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	})
	<-p.done
	return nil
}

// kill ends the process for a reason of its own (a Problem); Err reports
// the reason.
func (p *Process) kill() {
	syscall.Kill(-p.pgid, syscall.SIGTERM)
	go func() {
		select {
		case <-p.done:
		case <-time.After(stopGrace):
			syscall.Kill(-p.pgid, syscall.SIGKILL)
		}
	}()
}

// Done is closed when the process exited and Events was closed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err says why the process exited, once Done or Events is closed (nil
// before): nil
// after Stop, ErrNoConversation for a --resume of an unknown id, a
// *Problem when parley can tell people what to do, or the exit status with
// the end of stderr.
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

// read turns stdout into events until it closes.
func (p *Process) read() {
	defer close(p.readDone)
	log := p.r.log.With("key", p.key, "pid", p.pgid)
	parse := newParser()
	br := bufio.NewReaderSize(p.stdout, 64*1024)
	for {
		// ReadBytes has no limit: the initialize answer and tool results
		// run to several MiB.
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			got, perr := parse.parse(b)
			if perr != nil {
				log.Debug("claudecode: skipped a line", "err", perr, "line", truncate(string(b), 200))
			}
			p.handle(got)
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				log.Debug("claudecode: stdout", "err", err)
			}
			return
		}
	}
}

func (p *Process) handle(got parsed) {
	p.mu.Lock()
	if got.request != nil && got.request.Subtype == "can_use_tool" {
		p.pending[got.request.ID] = got.request.Input
	}
	if got.response != nil {
		if ch := p.waiting[got.response.ID]; ch != nil {
			ch <- *got.response
		}
	}
	if got.noConversation {
		p.noConversation = true
	}
	newProblem := got.auth != "" && p.problem == nil
	if newProblem {
		p.problem = authProblem(got.auth)
	}
	p.mu.Unlock()
	if newProblem {
		// Claude Code retries a refused key for minutes: nothing will get
		// better, so end it now and say why.
		p.r.log.Warn("claudecode: "+p.problem.Cause, "key", p.key)
		p.kill()
	}
	if got.request != nil && got.request.Subtype != "can_use_tool" {
		// Claude Code waits for an answer to every control request; parley
		// registered no hooks or SDK MCP servers, so say so rather than
		// leave it waiting.
		go p.write(context.Background(), map[string]any{
			"type": "control_response",
			"response": map[string]any{"subtype": "error", "request_id": got.request.ID,
				"error": "parley does not handle " + got.request.Subtype},
		})
	}
	p.queue.push(got.events...)
}

// wait reaps the process. Once claude itself exited it kills what is left
// of its group while the zombie still holds the group id (so the kill
// cannot reach a stranger), and what it started elsewhere.
func (p *Process) wait() {
	waitExited(p.pgid)
	syscall.Kill(-p.pgid, syscall.SIGKILL)
	// Its Bash commands run in sessions of their own: find them by marker.
	for range 3 {
		if len(marked(p.marker)) == 0 {
			break
		}
		signalMarked(p.marker, syscall.SIGKILL)
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
	p.queue.close()
	close(p.done)
}

// waitExited blocks until pid exited, without reaping it (WNOWAIT).
func waitExited(pid int) {
	const pPID = 1
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}

// stderrTail keeps the end of stderr for exit errors and logs each chunk.
type stderrTail struct{ p *Process }

func (s *stderrTail) Write(b []byte) (int, error) {
	s.p.r.log.Debug("claudecode: stderr", "key", s.p.key, "text", truncate(string(b), 1000))
	s.p.mu.Lock()
	s.p.stderr = append(s.p.stderr, b...)
	if over := len(s.p.stderr) - stderrKeep; over > 0 {
		s.p.stderr = append([]byte(nil), s.p.stderr[over:]...)
	}
	s.p.mu.Unlock()
	return len(b), nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// eventQueue holds parsed events until the consumer takes them, so the
// reader of stdout never waits for the consumer.
type eventQueue struct {
	mu     sync.Mutex
	items  []Event
	closed bool
	ready  chan struct{} // a token when items or closed changed
}

func (q *eventQueue) push(events ...Event) {
	if len(events) == 0 {
		return
	}
	q.mu.Lock()
	q.items = append(q.items, events...)
	q.mu.Unlock()
	q.wake()
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

func (q *eventQueue) wake() {
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// take returns the queued events, or waits for some; closed is true when
// no more will come.
func (q *eventQueue) take() (events []Event, closed bool) {
	for {
		q.mu.Lock()
		events, closed = q.items, q.closed
		q.items = nil
		q.mu.Unlock()
		if len(events) > 0 || closed {
			return events, closed
		}
		<-q.ready
	}
}

// forward hands queued events to Events in order and closes it at the end.
func (p *Process) forward() {
	defer close(p.events)
	for {
		events, closed := p.queue.take()
		for _, e := range events {
			select {
			case p.events <- e:
			case <-p.stopping:
				return
			}
		}
		if closed && len(events) == 0 {
			return
		}
	}
}

// removeFiles removes the pidfile and the TMPDIR, unless the pidfile is no
// longer this process's: then a successor on the key owns both.
func (p *Process) removeFiles() {
	b, err := os.ReadFile(p.r.pidfile(p.key))
	var rec pidRecord
	if err == nil && (json.Unmarshal(b, &rec) != nil || rec.Marker != p.marker) {
		return
	}
	os.Remove(p.r.pidfile(p.key))
	os.RemoveAll(p.tmpdir)
}
