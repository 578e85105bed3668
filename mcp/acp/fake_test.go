package acp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
)

// The fake ACP agent: a scripted agent speaking ACP as the schema
// documents it (https://agentclientprotocol.com/protocol/overview), run in
// the test process and reached through a real child process, so the
// driver's process handling is the real one. The child is this test
// binary in relay mode: it copies its stdin to a unix socket the fake
// listens on and the socket to its stdout, and exits when the socket
// closes. Killing it is a crash of the agent.

const (
	relayEnv = "PARLEY_ACP_TEST_RELAY"
	// waitLong bounds what a test waits for; it never decides an outcome.
	// A real agent's start is part of it: OpenCode 1.18.33 took up to 21 s
	// to answer initialize on 2 loaded cores, and 30 s was passed there.
	waitLong = 3 * time.Minute
)

func TestMain(m *testing.M) {
	if path := os.Getenv(relayEnv); path != "" {
		relay(path)
		return
	}
	os.Exit(m.Run())
}

// relayHello is the first line the relay sends on the socket: what the
// fake checks of the process's environment.
type relayHello struct {
	PID    int    `json:"pid"`
	PWD    string `json:"pwd"`
	Cwd    string `json:"cwd"`
	TmpDir string `json:"tmpdir"`
	Marker string `json:"marker"`
	Claude string `json:"claude"`
}

func relay(path string) {
	c, err := net.Dial("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(2)
	}
	cwd, _ := os.Getwd()
	var claude []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CLAUDE") {
			claude = append(claude, kv)
		}
	}
	hello, _ := json.Marshal(relayHello{PID: os.Getpid(), PWD: os.Getenv("PWD"), Cwd: cwd, TmpDir: os.Getenv("TMPDIR"),
		Marker: os.Getenv(markerVar), Claude: strings.Join(claude, " ")})
	c.Write(append(hello, '\n'))
	go func() {
		io.Copy(c, os.Stdin)
		c.(*net.UnixConn).CloseWrite()
	}()
	io.Copy(os.Stdout, c)
	fmt.Fprintln(os.Stderr, "relay: the agent's socket closed")
	os.Exit(0)
}

// fakeCaps are what the fake agent offers in its initialize answer.
type fakeCaps struct {
	load, resume, close, http bool
	// version is the protocolVersion it answers (0: 1).
	version int
	// silent never answers initialize.
	silent bool
	// authRequired refuses session/new and session/load with ACP's
	// auth_required error.
	authRequired bool
}

// fakeAgent is the agent's side, shared by its processes: the sessions it
// stored ("on disk") outlive a process.
type fakeAgent struct {
	t    testing.TB
	path string
	caps fakeCaps

	procs chan *fakeProc

	mu       sync.Mutex
	store    map[string]*fakeStored
	next     int
	onPrompt func(t *fakeTurn) string
}

type fakeStored struct {
	history []json.RawMessage // the updates of its turns, to replay
}

func newFakeAgent(t testing.TB, caps fakeCaps) *fakeAgent {
	dir, err := os.MkdirTemp("", "acpfake")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := &fakeAgent{t: t, path: filepath.Join(dir, "agent.sock"), caps: caps,
		procs: make(chan *fakeProc, 16), store: map[string]*fakeStored{}}
	ln, err := net.Listen("unix", a.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go a.serve(c)
		}
	}()
	return a
}

// script sets what the agent does with each prompt: f streams the turn
// and returns its stopReason.
func (a *fakeAgent) script(f func(t *fakeTurn) string) {
	a.mu.Lock()
	a.onPrompt = f
	a.mu.Unlock()
}

// options are Options running this fake.
func (a *fakeAgent) options(t testing.TB) Options {
	return Options{
		Name:     "fake",
		Command:  os.Args[0],
		Workdir:  t.TempDir(),
		Env:      []string{"PATH=" + os.Getenv("PATH"), "PWD=/not/the/workdir", "CLAUDECODE=1"},
		ExtraEnv: []string{relayEnv + "=" + a.path},
		StateDir: filepath.Join(t.TempDir(), "state"),
		Logger:   slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// nextProc waits for the next process of the agent to connect.
func (a *fakeAgent) nextProc(t testing.TB) *fakeProc {
	t.Helper()
	select {
	case p := <-a.procs:
		return p
	case <-time.After(waitLong):
		t.Fatal("no agent process connected")
	}
	return nil
}

// fakeProc is one process of the fake agent.
type fakeProc struct {
	a     *fakeAgent
	hello relayHello
	c     net.Conn

	wmu sync.Mutex

	mu       sync.Mutex
	sessions map[string]bool // open in this process
	turns    map[string]*fakeTurn
	waiting  map[string]chan json.RawMessage
	nextReq  int
	received []message
	changed  chan struct{}
	gone     chan struct{}
}

func (a *fakeAgent) serve(c net.Conn) {
	br := bufio.NewReader(c)
	line, err := br.ReadBytes('\n')
	if err != nil {
		c.Close()
		return
	}
	p := &fakeProc{a: a, c: c, sessions: map[string]bool{}, turns: map[string]*fakeTurn{},
		waiting: map[string]chan json.RawMessage{}, changed: make(chan struct{}), gone: make(chan struct{})}
	json.Unmarshal(line, &p.hello)
	a.procs <- p
	defer close(p.gone)
	defer c.Close()
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var m message
			if json.Unmarshal(line, &m) != nil {
				a.t.Errorf("fake agent: a line that is not JSON: %q", line)
				continue
			}
			p.record(m)
			p.handle(m)
		}
		if err != nil {
			return
		}
	}
}

func (p *fakeProc) record(m message) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.received = append(p.received, m)
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitFor waits until the client sent a message matching f, and returns it.
func (p *fakeProc) waitFor(t testing.TB, what string, f func(message) bool) message {
	t.Helper()
	timeout := time.After(waitLong)
	for i := 0; ; {
		p.mu.Lock()
		got, ch := p.received, p.changed
		p.mu.Unlock()
		for ; i < len(got); i++ {
			if f(got[i]) {
				return got[i]
			}
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("the client sent no %s", what)
		}
	}
}

// sent lists the messages of method the client sent.
func (p *fakeProc) sent(method string) []message {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []message
	for _, m := range p.received {
		if m.Method == method {
			out = append(out, m)
		}
	}
	return out
}

func (p *fakeProc) send(v any) {
	b, _ := json.Marshal(v)
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.c.Write(append(b, '\n'))
}

func (p *fakeProc) respond(id json.RawMessage, result any) {
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (p *fakeProc) fail(id json.RawMessage, code int, msg string) {
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func (p *fakeProc) handle(m message) {
	a := p.a
	if m.Method == "" {
		// A response to a request of the agent's.
		var id string
		json.Unmarshal(m.ID, &id)
		p.mu.Lock()
		ch := p.waiting[id]
		delete(p.waiting, id)
		p.mu.Unlock()
		if ch != nil {
			if m.Error != nil {
				ch <- nil
			} else {
				ch <- m.Result
			}
		}
		return
	}
	var params struct {
		SessionID string `json:"sessionId"`
		Prompt    []struct {
			Text string `json:"text"`
		} `json:"prompt"`
	}
	json.Unmarshal(m.Params, &params)
	switch m.Method {
	case "initialize":
		if a.caps.silent {
			return
		}
		version := a.caps.version
		if version == 0 {
			version = 1
		}
		sc := map[string]any{}
		if a.caps.close {
			sc["close"] = map[string]any{}
		}
		if a.caps.resume {
			sc["resume"] = map[string]any{}
		}
		p.respond(m.ID, map[string]any{"protocolVersion": version, "agentCapabilities": map[string]any{
			"loadSession": a.caps.load, "mcpCapabilities": map[string]bool{"http": a.caps.http, "sse": false},
			"sessionCapabilities": sc},
			"authMethods": []any{map[string]string{"id": "login", "name": "Log in", "description": "Run `fake login` in a terminal"}},
			"agentInfo":   map[string]string{"name": "Fake", "version": "1.0"}})
	case "session/new":
		if a.caps.authRequired {
			p.fail(m.ID, codeAuthRequired, "Authentication required")
			return
		}
		a.mu.Lock()
		a.next++
		id := fmt.Sprintf("ses_%d", a.next)
		a.store[id] = &fakeStored{}
		a.mu.Unlock()
		p.mu.Lock()
		p.sessions[id] = true
		p.mu.Unlock()
		p.respond(m.ID, map[string]any{"sessionId": id, "configOptions": []any{map[string]any{
			"id": "model", "name": "Model", "category": "model", "type": "select", "currentValue": "fake/model-1"}}})
		p.notifyUpdate(id, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
	case "session/load", "session/resume":
		a.mu.Lock()
		st := a.store[params.SessionID]
		var history []json.RawMessage
		if st != nil {
			history = append(history, st.history...)
		}
		a.mu.Unlock()
		if st == nil || m.Method == "session/load" && !a.caps.load || m.Method == "session/resume" && !a.caps.resume {
			p.fail(m.ID, codeInternal, "Internal error: no such session")
			return
		}
		if m.Method == "session/load" {
			for _, u := range history {
				p.send(map[string]any{"jsonrpc": "2.0", "method": "session/update",
					"params": map[string]any{"sessionId": params.SessionID, "update": u}})
			}
		}
		p.mu.Lock()
		p.sessions[params.SessionID] = true
		p.mu.Unlock()
		p.respond(m.ID, map[string]any{"configOptions": []any{map[string]any{
			"id": "model", "category": "model", "currentValue": "fake/model-1"}}})
		p.notifyUpdate(params.SessionID, map[string]any{"sessionUpdate": "available_commands_update", "availableCommands": []any{}})
	case "session/close":
		p.mu.Lock()
		known := p.sessions[params.SessionID]
		delete(p.sessions, params.SessionID)
		if t := p.turns[params.SessionID]; t != nil {
			t.cancel()
		}
		p.mu.Unlock()
		if !known {
			p.fail(m.ID, codeInvalidParams, "unknown session")
			return
		}
		p.respond(m.ID, map[string]any{})
	case "session/prompt":
		p.mu.Lock()
		open := p.sessions[params.SessionID]
		p.mu.Unlock()
		if !open {
			p.fail(m.ID, codeInvalidParams, "session not loaded: "+params.SessionID)
			return
		}
		text := ""
		if len(params.Prompt) > 0 {
			text = params.Prompt[0].Text
		}
		t := &fakeTurn{p: p, session: params.SessionID, text: text, cancelled: make(chan struct{})}
		p.mu.Lock()
		p.turns[params.SessionID] = t
		p.mu.Unlock()
		t.record(map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]string{"type": "text", "text": text}}, false)
		go func() {
			a.mu.Lock()
			f := a.onPrompt
			a.mu.Unlock()
			stop := "end_turn"
			if f != nil {
				stop = f(t)
			}
			if t.isCancelled() {
				// ACP: a cancelled turn MUST answer cancelled.
				stop = "cancelled"
			}
			p.mu.Lock()
			if p.turns[params.SessionID] == t {
				delete(p.turns, params.SessionID)
			}
			p.mu.Unlock()
			if stop == "" {
				p.fail(m.ID, codeInternal, "the model failed")
				return
			}
			p.respond(m.ID, map[string]any{"stopReason": stop})
		}()
	case "session/cancel":
		p.mu.Lock()
		t := p.turns[params.SessionID]
		p.mu.Unlock()
		if t != nil {
			t.cancel()
		}
	default:
		if len(m.ID) > 0 {
			p.fail(m.ID, codeMethodNotFound, "unknown method "+m.Method)
		}
	}
}

func (p *fakeProc) notifyUpdate(session string, u any) {
	p.send(map[string]any{"jsonrpc": "2.0", "method": "session/update", "params": map[string]any{"sessionId": session, "update": u}})
}

// request sends a request of the agent's and returns its id and where its
// result comes (nil for an error response).
func (p *fakeProc) request(method string, params any) (string, chan json.RawMessage) {
	ch := make(chan json.RawMessage, 1)
	p.mu.Lock()
	p.nextReq++
	id := fmt.Sprintf("req-%d", p.nextReq)
	p.waiting[id] = ch
	p.mu.Unlock()
	p.send(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	return id, ch
}

// kill kills the process (a crash of the agent).
func (p *fakeProc) kill(t testing.TB) {
	t.Helper()
	proc, err := os.FindProcess(p.hello.PID)
	if err != nil {
		t.Fatal(err)
	}
	proc.Kill()
}

// fakeTurn is one prompt the fake agent runs.
type fakeTurn struct {
	p          *fakeProc
	session    string
	text       string
	cancelled  chan struct{}
	cancelOnce sync.Once
}

func (t *fakeTurn) cancel() { t.cancelOnce.Do(func() { close(t.cancelled) }) }
func (t *fakeTurn) isCancelled() bool {
	select {
	case <-t.cancelled:
		return true
	default:
		return false
	}
}

// record sends an update of the turn and keeps it for a replay.
func (t *fakeTurn) record(u map[string]any, send bool) {
	b, _ := json.Marshal(u)
	t.p.a.mu.Lock()
	if st := t.p.a.store[t.session]; st != nil {
		st.history = append(st.history, b)
	}
	t.p.a.mu.Unlock()
	if send {
		t.p.notifyUpdate(t.session, json.RawMessage(b))
	}
}

func (t *fakeTurn) say(message, text string) {
	t.record(map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": message,
		"content": map[string]string{"type": "text", "text": text}}, true)
}

func (t *fakeTurn) think(text string) {
	t.record(map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]string{"type": "text", "text": text}}, true)
}

func (t *fakeTurn) update(u map[string]any) { t.record(u, true) }

// ask sends session/request_permission for a shell call of command with
// OpenCode's three options, and returns the outcome the client chose
// (nil: an error response).
func (t *fakeTurn) ask(callID, command string) map[string]string {
	_, ch := t.p.request("session/request_permission", map[string]any{
		"sessionId": t.session,
		"toolCall":  map[string]any{"toolCallId": callID, "title": command, "kind": "execute", "rawInput": map[string]string{"command": command}},
		"options": []any{
			map[string]string{"optionId": "once", "kind": "allow_once", "name": "Allow once"},
			map[string]string{"optionId": "always", "kind": "allow_always", "name": "Always allow"},
			map[string]string{"optionId": "reject", "kind": "reject_once", "name": "Reject"},
		},
	})
	raw := <-ch
	if raw == nil {
		return nil
	}
	var r struct {
		Outcome map[string]string `json:"outcome"`
	}
	json.Unmarshal(raw, &r)
	return r.Outcome
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// collect reads c's events until one satisfies stop, and returns them all.
func collect(t testing.TB, c agent.Conversation, stop func(agent.Event) bool) []agent.Event {
	t.Helper()
	var got []agent.Event
	timeout := time.After(waitLong)
	for {
		select {
		case e, ok := <-c.Events():
			if !ok {
				t.Fatalf("events closed (err %v) after %v", c.Err(), got)
			}
			got = append(got, e)
			if stop(e) {
				return got
			}
		case <-timeout:
			t.Fatalf("timed out after %v", got)
		}
	}
}

func isResult(e agent.Event) bool { _, ok := e.(agent.Result); return ok }

func isPermission(e agent.Event) bool { _, ok := e.(agent.PermissionRequest); return ok }

// of returns the events of type T.
func of[T agent.Event](events []agent.Event) []T {
	var out []T
	for _, e := range events {
		if x, ok := e.(T); ok {
			out = append(out, x)
		}
	}
	return out
}
