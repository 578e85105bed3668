package orchestrator

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/claudecode"
)

// fakeClaude is Claude Code as package claudecode's doc describes it
// (https://code.claude.com/docs/en/headless, stream-json),
// with a scripted model: one long-lived process per conversation taking
// turns on Send, each reported as Init, TextDeltas and Texts, ToolUses
// (a PermissionRequest first when the call needs one, waiting for its
// Answer) with their ToolResults, and a Result. An interrupt ends the turn
// with terminal_reason aborted_streaming; a denial with interrupt with
// aborted_tools. As Claude Code 2.1.328 does, a turn's message is in the
// transcript from the turn's start (its Init), so a conversation exists
// once a turn started, and a process killed mid-turn leaves the message
// there but no answer. When the killed turn had started a background
// command (Background), a process resuming the conversation first runs a
// turn of its own reporting the command unfinished (Init, then a Result
// with Origin task-notification) before it reads stdin. --resume of a
// conversation that does not exist fails, as does --session-id of one
// that does.
type fakeClaude struct {
	mu sync.Mutex
	// model plays each turn (default: answers "echo: " + the text): the
	// model set when the turn was handed (Send), so that a test may set
	// another for later turns as soon as a Send returned, whenever the
	// process gets to play the turn.
	model func(t *fakeTurn)
	// failStart, when set, is Start's error.
	failStart error
	starts    []fakeStart
	procs     []*fakeProc
	// turns are the messages each conversation has in its transcript.
	turns map[string][]string
	// background marks the conversations whose killed turn left a
	// background command unfinished.
	background map[string]bool
}

type fakeStart struct {
	key, conversation string
	resume            bool
}

func newFakeClaude(model func(t *fakeTurn)) *fakeClaude {
	return &fakeClaude{model: model, turns: map[string][]string{}, background: map[string]bool{}}
}

var (
	_ agent.Driver = (*fakeClaude)(nil)
	_ agent.Namer  = (*fakeClaude)(nil)
)

// NewConversation names conversations as Claude Code's driver does.
func (f *fakeClaude) NewConversation() string { return newUUID() }

// Start starts the conversation req names, as claudecode's Driver does.
func (f *fakeClaude) Start(ctx context.Context, req agent.StartRequest) (agent.Conversation, error) {
	return f.start(ctx, req.Session, req.Conversation, req.Resume)
}

func (f *fakeClaude) start(ctx context.Context, key, conversation string, resume bool) (agent.Conversation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.starts = append(f.starts, fakeStart{key: key, conversation: conversation, resume: resume})
	if f.failStart != nil {
		return nil, f.failStart
	}
	_, exists := f.turns[conversation]
	switch {
	case resume && !exists:
		return nil, fmt.Errorf("no conversation found with session ID: %s", conversation)
	case !resume && exists:
		return nil, fmt.Errorf("session ID %s is already in use", conversation)
	}
	p := &fakeProc{f: f, conv: conversation, key: key, events: make(chan agent.Event),
		sends: make(chan handed, 8), interrupts: make(chan struct{}, 1), kill: make(chan struct{}),
		done: make(chan struct{}), answers: map[string]chan agent.Decision{},
		notify: resume && f.background[conversation]}
	delete(f.background, conversation)
	f.procs = append(f.procs, p)
	go p.run()
	return p, nil
}

func (f *fakeClaude) setFailStart(err error) {
	f.mu.Lock()
	f.failStart = err
	f.mu.Unlock()
}

func (f *fakeClaude) startsOf(key string) []fakeStart {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeStart
	for _, s := range f.starts {
		if s.key == key {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeClaude) transcript(conv string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.turns[conv]...)
}

// procsOf returns the processes started for key, oldest first.
func (f *fakeClaude) procsOf(key string) []*fakeProc {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*fakeProc
	for _, p := range f.procs {
		if p.key == key {
			out = append(out, p)
		}
	}
	return out
}

// sent returns every text handed to processes of key.
func (f *fakeClaude) sent(key string) []string {
	var out []string
	for _, p := range f.procsOf(key) {
		out = append(out, p.received()...)
	}
	return out
}

type fakeProc struct {
	f          *fakeClaude
	conv, key  string
	events     chan agent.Event
	sends      chan handed
	interrupts chan struct{}
	kill       chan struct{}
	killOnce   sync.Once
	done       chan struct{}
	// notify: it first reports a background command the killed process
	// left unfinished.
	notify bool

	mu        sync.Mutex
	got       []string
	answers   map[string]chan agent.Decision
	decisions []agent.Decision
	err       error
	stopped   bool
}

var _ agent.Conversation = (*fakeProc)(nil)

func (p *fakeProc) ID() string { return p.conv }

// handed is a turn handed to a process: its text and the model to play it.
type handed struct {
	text  string
	model func(t *fakeTurn)
}

func (p *fakeProc) Send(ctx context.Context, text string) error {
	p.f.mu.Lock()
	model := p.f.model
	p.f.mu.Unlock()
	select {
	case p.sends <- handed{text: text, model: model}:
		p.mu.Lock()
		p.got = append(p.got, text)
		p.mu.Unlock()
		return nil
	case <-p.done:
		return errors.New("the process exited")
	}
}

func (p *fakeProc) Events() <-chan agent.Event { return p.events }

func (p *fakeProc) Answer(id string, d agent.Decision) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch, ok := p.answers[id]
	if !ok {
		return fmt.Errorf("no permission request %s is waiting", id)
	}
	delete(p.answers, id)
	p.decisions = append(p.decisions, d)
	ch <- d
	return nil
}

func (p *fakeProc) Interrupt(ctx context.Context) error {
	select {
	case p.interrupts <- struct{}{}:
	default:
	}
	return nil
}

func (p *fakeProc) Stop() error {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.killOnce.Do(func() { close(p.kill) })
	<-p.done
	return nil
}

// crash ends the process as if it died by itself with err.
func (p *fakeProc) crash(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
	p.killOnce.Do(func() { close(p.kill) })
	<-p.done
}

func (p *fakeProc) Done() <-chan struct{} { return p.done }

func (p *fakeProc) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *fakeProc) received() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

func (p *fakeProc) wasStopped() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopped
}

func (p *fakeProc) decided() []agent.Decision {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]agent.Decision(nil), p.decisions...)
}

func (p *fakeProc) run() {
	defer close(p.events)
	defer close(p.done)
	if p.notify {
		for _, ev := range []agent.Event{agent.Init{Conversation: p.conv, Model: "claude-test"},
			agent.Result{Stop: agent.StopEndTurn, Origin: "task-notification"}} {
			select {
			case p.events <- ev:
			case <-p.kill:
				return
			}
		}
	}
	for {
		select {
		case h := <-p.sends:
			if !p.turn(h) {
				return
			}
		case <-p.kill:
			return
		}
	}
}

// turn plays one turn; false when the process was killed in it.
func (p *fakeProc) turn(h handed) bool {
	text, model := h.text, h.model
	// An interrupt sent between turns has nothing to stop.
	select {
	case <-p.interrupts:
	default:
	}
	t := &fakeTurn{p: p, Text: text}
	if !t.emit(agent.Init{Conversation: p.conv, Model: "claude-test"}) {
		return !t.killed
	}
	p.f.mu.Lock()
	p.f.turns[p.conv] = append(p.f.turns[p.conv], text)
	p.f.mu.Unlock()
	if model == nil {
		model = func(t *fakeTurn) { t.Say("echo: " + t.Text) }
	}
	model(t)
	if t.killed {
		return false
	}
	if !t.ended {
		t.end(agent.Result{Stop: agent.StopEndTurn, Text: t.last})
	}
	return !t.killed
}

// fakeTurn is what a scripted model does in one turn.
type fakeTurn struct {
	p      *fakeProc
	Text   string // the user message
	block  int
	last   string
	ended  bool // its Result was sent
	killed bool // the process was killed in it
}

// emit sends ev unless the turn was interrupted or the process killed.
func (t *fakeTurn) emit(ev agent.Event) bool {
	if t.ended || t.killed {
		return false
	}
	select {
	case <-t.p.interrupts:
		t.end(agent.Result{Stop: agent.StopCancelled, Errors: []string{"error_during_execution"}})
		return false
	default:
	}
	select {
	case t.p.events <- ev:
		return true
	case <-t.p.kill:
		t.killed = true
		return false
	}
}

// end sends the Result.
func (t *fakeTurn) end(r agent.Result) {
	select {
	case t.p.events <- r:
	case <-t.p.kill:
		t.killed = true
		return
	}
	t.ended = true
}

// Say streams one text block in chunks.
func (t *fakeTurn) Say(chunks ...string) {
	for _, c := range chunks {
		if !t.emit(agent.TextDelta{Block: t.block, Text: c}) {
			return
		}
	}
	whole := strings.Join(chunks, "")
	if t.emit(agent.Text{Block: t.block, Text: whole}) {
		t.last = whole
	}
	t.block++
}

// Pause waits d, or until the turn is interrupted or the process killed.
func (t *fakeTurn) Pause(d time.Duration) {
	if t.ended || t.killed {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.p.interrupts:
		t.end(agent.Result{Stop: agent.StopCancelled, Errors: []string{"error_during_execution"}})
	case <-t.p.kill:
		t.killed = true
	}
}

// Retry is an API that keeps failing: an APIRetry every d until the turn
// is interrupted or the process killed.
func (t *fakeTurn) Retry(d time.Duration, err string) {
	for n := 1; !t.ended && !t.killed; n++ {
		t.Pause(d)
		t.emit(agent.APIRetry{Attempt: n, Delay: d, Error: err})
	}
}

// Bash calls Bash with command; with ask, it asks permission first. Run, it
// gives stdout and exit code 0.
func (t *fakeTurn) Bash(id, command string, ask bool, stdout string) {
	t.BashInput(id, map[string]any{"command": command, "description": "run " + command}, ask, stdout)
}

// BashInput is Bash with the call's whole input given; its description
// is the permission prompt's.
func (t *fakeTurn) BashInput(id string, in map[string]any, ask bool, stdout string) {
	t.bash(id, in, ask, false, stdout)
}

// BashAlways is Bash asking permission with an offer to remember it
// (PermissionRequest.CanAlways); it returns the decision.
func (t *fakeTurn) BashAlways(id, command string) agent.Decision {
	return t.bash(id, map[string]any{"command": command}, true, true, "ok")
}

func (t *fakeTurn) bash(id string, in map[string]any, ask, canAlways bool, stdout string) agent.Decision {
	input, _ := json.Marshal(in)
	if !t.emit(agent.ToolUse{ID: id, Name: "Bash", Show: claudecode.Show("Bash", input), Input: input}) {
		return agent.Decision{}
	}
	var d agent.Decision
	if ask {
		ch := make(chan agent.Decision, 1)
		rid := "req-" + id
		t.p.mu.Lock()
		t.p.answers[rid] = ch
		t.p.mu.Unlock()
		description, _ := in["description"].(string)
		if !t.emit(agent.PermissionRequest{RequestID: rid, ToolName: "Bash", ToolUseID: id,
			Description: description, Show: claudecode.Show("Bash", input), Input: input, CanAlways: canAlways}) {
			return d
		}
		select {
		case d = <-ch:
		case <-t.p.interrupts:
			t.p.mu.Lock()
			delete(t.p.answers, rid)
			t.p.mu.Unlock()
			t.end(agent.Result{Stop: agent.StopCancelled, Errors: []string{"error_during_execution"}})
			return d
		case <-t.p.kill:
			t.killed = true
			return d
		}
		if !d.Allow {
			if !t.emit(agent.ToolResult{ToolUseID: id, IsError: true, Stdout: d.Message}) {
				return d
			}
			if d.Interrupt {
				t.end(agent.Result{Stop: agent.StopDenied, Errors: []string{"error_during_execution"}})
			}
			return d
		}
	}
	zero := 0
	t.emit(agent.ToolResult{ToolUseID: id, Stdout: stdout, ExitCode: &zero})
	return d
}

// Withdrawn calls Bash with command and asks permission, then withdraws
// the prompt after d, as Claude Code does when an interrupt reaches it
// while it waits (control_cancel_request), and ends the turn as
// interrupted d later.
func (t *fakeTurn) Withdrawn(id, command string, d time.Duration) {
	input, _ := json.Marshal(map[string]string{"command": command})
	if !t.emit(agent.ToolUse{ID: id, Name: "Bash", Show: claudecode.Show("Bash", input), Input: input}) {
		return
	}
	if !t.emit(agent.PermissionRequest{RequestID: "req-" + id, ToolName: "Bash", ToolUseID: id, Show: claudecode.Show("Bash", input), Input: input}) {
		return
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-t.p.kill:
		t.killed = true
		return
	}
	if t.emit(agent.PermissionCancel{RequestID: "req-" + id}) {
		t.Pause(d)
		t.end(agent.Result{Stop: agent.StopCancelled, Errors: []string{"error_during_execution"}})
	}
}

// Background starts a command that does not end in the background; a
// process killed while it runs leaves it unfinished.
func (t *fakeTurn) Background(id, command string) {
	input, _ := json.Marshal(map[string]any{"command": command, "run_in_background": true})
	if !t.emit(agent.ToolUse{ID: id, Name: "Bash", Show: claudecode.Show("Bash", input), Input: input}) {
		return
	}
	t.p.f.mu.Lock()
	t.p.f.background[t.p.conv] = true
	t.p.f.mu.Unlock()
	t.emit(agent.ToolResult{ToolUseID: id, Stdout: "Command running in background with ID: " + id})
}

// A turn is played by the model set when it was handed, however late the
// process gets to it: a test that sets the next turns' model once a Send
// returned does not change the turn handed (the cluster test on
// PostgreSQL raced with the process's reading of the model).
func TestFakeModelOfHandedTurn(t *testing.T) {
	fc := newFakeClaude(func(ft *fakeTurn) { ft.Say("first model") })
	p, err := fc.start(context.Background(), "s", "c", false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Stop() }()
	if err := p.Send(context.Background(), "question"); err != nil {
		t.Fatal(err)
	}
	fc.mu.Lock()
	fc.model = func(ft *fakeTurn) { ft.Say("second model") }
	fc.mu.Unlock()
	for ev := range p.Events() {
		if r, ok := ev.(agent.Result); ok {
			if r.Text != "first model" {
				t.Fatalf("the handed turn answered %q, want the model of when it was handed", r.Text)
			}
			return
		}
	}
	t.Fatal("the process exited without a Result")
}

// claudeAgent is the orchestrator's agents when the default is d, as
// Claude Code, asking people its permission prompts when ask.
func claudeAgent(d agent.Driver, ask bool) map[string]Agent {
	return map[string]Agent{"": {Driver: d, Title: "Claude Code", Kind: "claude-code", AskPermissions: ask}}
}

// driverFunc is a Driver that is a function.
type driverFunc func(ctx context.Context, req agent.StartRequest) (agent.Conversation, error)

func (f driverFunc) Start(ctx context.Context, req agent.StartRequest) (agent.Conversation, error) {
	return f(ctx, req)
}

// namedDriver is a Driver of conversations the client names.
type namedDriver struct {
	agent.Driver
	agent.Namer
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
