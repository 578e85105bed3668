//go:build linux

package acp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/internal/agentproc"
)

func newDriver(t *testing.T, a *fakeAgent, edit func(*Options)) (*Driver, Options) {
	t.Helper()
	opts := a.options(t)
	if edit != nil {
		edit(&opts)
	}
	d := New(opts)
	t.Cleanup(func() { d.Close() })
	return d, opts
}

func start(t *testing.T, d *Driver, req agent.StartRequest) agent.Conversation {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLong)
	defer cancel()
	c, err := d.Start(ctx, req)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return c
}

// turn sends text and returns the events up to the turn's Result.
func runTurn(t *testing.T, c agent.Conversation, text string) []agent.Event {
	t.Helper()
	if err := c.Send(t.Context(), text); err != nil {
		t.Fatalf("send: %v", err)
	}
	return collect(t, c, isResult)
}

func lastResult(t *testing.T, events []agent.Event) agent.Result {
	t.Helper()
	r := of[agent.Result](events)
	if len(r) != 1 {
		t.Fatalf("results %v in %v", r, events)
	}
	return r[0]
}

// TestStreamedAnswer: chunks stream as TextDeltas, a block ends with its
// whole Text at a thought, at another message and at the end of the turn,
// and the process runs with the workdir as PWD and cwd, its own TMPDIR
// and marker, and no CLAUDE* variable.
func TestStreamedAnswer(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, opts := newDriver(t, a, nil)
	a.script(func(t *fakeTurn) string {
		t.say("m1", "Hel")
		t.say("m1", "lo")
		t.think("pondering")
		t.say("m1", " again")
		t.say("m2", "Bye")
		return "end_turn"
	})
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	got := runTurn(t, c, "hi")
	want := []agent.Event{
		agent.Init{Conversation: c.ID(), Model: "fake/model-1"},
		agent.TextDelta{Block: 0, Text: "Hel"},
		agent.TextDelta{Block: 0, Text: "lo"},
		agent.Text{Block: 0, Text: "Hello"},
		agent.Thought{Text: "pondering"},
		agent.TextDelta{Block: 1, Text: " again"},
		agent.Text{Block: 1, Text: " again"},
		agent.TextDelta{Block: 2, Text: "Bye"},
		agent.Text{Block: 2, Text: "Bye"},
		agent.Result{Stop: agent.StopEndTurn},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %#v\nwant %#v", got, want)
	}
	if !strings.HasPrefix(c.ID(), "ses_") {
		t.Fatalf("ID %q", c.ID())
	}
	wd, _ := filepath.Abs(opts.Workdir)
	h := p.hello
	if h.PWD != wd || h.Cwd != wd {
		t.Errorf("PWD %q, cwd %q; want %q", h.PWD, h.Cwd, wd)
	}
	rec, err := agentproc.ReadPidfile(filepath.Join(opts.StateDir, "agent.pid"))
	if h.TmpDir != filepath.Join(opts.StateDir, "tmp") || h.Marker == "" || err != nil || rec.Marker != markerVar+"="+h.Marker || rec.PID != h.PID {
		t.Errorf("TMPDIR %q, marker %q; pidfile %+v (%v)", h.TmpDir, h.Marker, rec, err)
	}
	if h.Claude != "" {
		t.Errorf("CLAUDE* leaked: %s", h.Claude)
	}
	prompt := p.sent("session/prompt")[0]
	var pp struct {
		SessionID string `json:"sessionId"`
		Prompt    []map[string]string
	}
	json.Unmarshal(prompt.Params, &pp)
	if pp.SessionID != c.ID() || pp.Prompt[0]["type"] != "text" || pp.Prompt[0]["text"] != "hi" {
		t.Fatalf("prompt %s", prompt.Params)
	}
	init := p.sent("initialize")[0]
	var ip struct {
		ProtocolVersion    int `json:"protocolVersion"`
		ClientCapabilities struct {
			FS       map[string]bool `json:"fs"`
			Terminal *bool           `json:"terminal"`
		} `json:"clientCapabilities"`
	}
	json.Unmarshal(init.Params, &ip)
	if ip.ProtocolVersion != 1 || ip.ClientCapabilities.FS["readTextFile"] || ip.ClientCapabilities.FS["writeTextFile"] ||
		ip.ClientCapabilities.Terminal == nil || *ip.ClientCapabilities.Terminal {
		t.Fatalf("initialize %s", init.Params)
	}
}

// TestToolCalls: a tool call shows its command once the agent tells it,
// its result carries the output and the exit code; a file call shows its
// path, a failed one its error as Stderr; a plan is reported whole.
func TestToolCalls(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, _ := newDriver(t, a, nil)
	a.script(func(t *fakeTurn) string {
		// OpenCode 1.18.33's shapes.
		t.say("m1", "Let me run it.")
		t.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call1", "title": "bash", "kind": "execute",
			"status": "pending", "locations": []any{map[string]string{"path": "/w"}}, "rawInput": map[string]string{"cwd": "/w"}})
		t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call1", "status": "in_progress",
			"kind": "execute", "title": "echo hi; exit 3", "rawInput": map[string]string{"command": "echo hi; exit 3", "cwd": "/w"}})
		t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call1", "status": "in_progress",
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "hi\n"}}}})
		t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call1", "status": "completed",
			"content":   []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "hi\n"}}},
			"rawOutput": map[string]any{"output": "hi\n", "metadata": map[string]any{"exit": 3}}})
		t.update(map[string]any{"sessionUpdate": "plan", "entries": []any{
			map[string]string{"content": "Read", "status": "completed", "priority": "high"},
			map[string]string{"content": "Fix", "status": "pending", "priority": "medium"}}})
		t.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call2", "title": "read", "kind": "read",
			"status": "pending", "locations": []any{map[string]string{"path": "/w/main.go"}}, "rawInput": map[string]any{}})
		t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call2", "status": "failed",
			"rawOutput": map[string]any{"error": "no such file"}})
		t.say("m2", "Done.")
		return "end_turn"
	})
	c := start(t, d, agent.StartRequest{Session: "s1"})
	got := runTurn(t, c, "run")[1:]
	three := 3
	want := []agent.Event{
		agent.TextDelta{Block: 0, Text: "Let me run it."},
		agent.Text{Block: 0, Text: "Let me run it."},
		agent.ToolUse{ID: "call1", Name: "bash", Kind: "execute", Show: "bash", Input: json.RawMessage(`{"cwd":"/w"}`)},
		agent.ToolUpdate{ID: "call1", Show: "echo hi; exit 3", Status: "in_progress"},
		agent.ToolResult{ToolUseID: "call1", Stdout: "hi\n", ExitCode: &three},
		agent.Plan{Entries: []agent.PlanEntry{{Content: "Read", Status: "completed", Priority: "high"}, {Content: "Fix", Status: "pending", Priority: "medium"}}},
		agent.ToolUse{ID: "call2", Name: "read", Kind: "read", Show: "/w/main.go", Input: json.RawMessage(`{}`)},
		agent.ToolResult{ToolUseID: "call2", IsError: true, Stderr: "no such file"},
		agent.TextDelta{Block: 1, Text: "Done."},
		agent.Text{Block: 1, Text: "Done."},
		agent.Result{Stop: agent.StopEndTurn},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %#v\nwant %#v", got, want)
	}
}

// TestMultiplexedSessions: two conversations share one process, their
// turns interleaved, each seeing only its own events.
func TestMultiplexedSessions(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, _ := newDriver(t, a, nil)
	gate := make(chan struct{})
	a.script(func(t *fakeTurn) string {
		t.say("m", "to "+t.text)
		if t.text == "first" {
			<-gate // the second turn runs while the first waits
		}
		t.say("m", " done")
		return "end_turn"
	})
	c1 := start(t, d, agent.StartRequest{Session: "s1"})
	c2 := start(t, d, agent.StartRequest{Session: "s2"})
	if c1.ID() == c2.ID() {
		t.Fatalf("one session id for both: %s", c1.ID())
	}
	p := a.nextProc(t)
	if err := c1.Send(t.Context(), "first"); err != nil {
		t.Fatal(err)
	}
	collect(t, c1, func(e agent.Event) bool { _, ok := e.(agent.TextDelta); return ok })
	got2 := runTurn(t, c2, "second")
	close(gate)
	got1 := collect(t, c1, isResult)
	if txt := of[agent.Text](got2); len(txt) != 1 || txt[0].Text != "to second done" {
		t.Fatalf("second: %v", got2)
	}
	if txt := of[agent.Text](got1); len(txt) != 1 || txt[0].Text != "to first done" {
		t.Fatalf("first: %v", got1)
	}
	select {
	case p2 := <-a.procs:
		t.Fatalf("a second process started (pid %d)", p2.hello.PID)
	default:
	}
	if n := len(p.sent("initialize")); n != 1 {
		t.Fatalf("%d initialize", n)
	}
}

// TestLoadReplayNotReported: after a restart, session/load replays the
// history; none of it is reported, and the next turn is.
func TestLoadReplayNotReported(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{load: true})
	a.script(func(t *fakeTurn) string {
		t.say("m", "answer to "+t.text)
		t.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "c-" + t.text, "title": "bash", "kind": "execute", "status": "completed"})
		return "end_turn"
	})
	d, opts := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	runTurn(t, c, "one")
	id := c.ID()
	d.Close()
	<-c.Done()
	if c.Err() != nil {
		t.Fatalf("Err after Close: %v", c.Err())
	}

	d2 := New(opts)
	t.Cleanup(func() { d2.Close() })
	c2 := start(t, d2, agent.StartRequest{Session: "s1", Conversation: id, Resume: true})
	if c2.ID() != id {
		t.Fatalf("ID %q, want %q", c2.ID(), id)
	}
	a.nextProc(t)
	p := a.nextProc(t)
	if n := len(p.sent("session/load")); n != 1 {
		t.Fatalf("%d session/load", n)
	}
	got := runTurn(t, c2, "two")
	for _, e := range got {
		if strings.Contains(fmtEvent(e), "one") {
			t.Fatalf("the replay was reported: %#v in %v", e, got)
		}
	}
	if _, ok := got[0].(agent.Init); !ok {
		t.Fatalf("first event %#v", got[0])
	}
	if txt := of[agent.Text](got); len(txt) != 1 || txt[0].Text != "answer to two" {
		t.Fatalf("events %v", got)
	}
}

func fmtEvent(e agent.Event) string {
	b, _ := json.Marshal(e)
	return string(b)
}

// TestResumePreferred: an agent offering session/resume is resumed, not
// loaded (no replay to drop).
func TestResumePreferred(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{load: true, resume: true})
	d, opts := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	runTurn(t, c, "one")
	d.Close()
	d2 := New(opts)
	t.Cleanup(func() { d2.Close() })
	start(t, d2, agent.StartRequest{Session: "s1", Conversation: c.ID(), Resume: true})
	a.nextProc(t)
	p := a.nextProc(t)
	if len(p.sent("session/resume")) != 1 || len(p.sent("session/load")) != 0 {
		t.Fatalf("resume %d, load %d", len(p.sent("session/resume")), len(p.sent("session/load")))
	}
}

// TestNoConversation: an agent that cannot load, or does not know the
// session, fails the Start with agent.ErrNoConversation, and a new
// conversation starts on the same process.
func TestNoConversation(t *testing.T) {
	for _, caps := range []fakeCaps{{}, {load: true}} {
		a := newFakeAgent(t, caps)
		d, _ := newDriver(t, a, nil)
		_, err := d.Start(t.Context(), agent.StartRequest{Session: "s1", Conversation: "ses_unknown", Resume: true})
		if !errors.Is(err, agent.ErrNoConversation) {
			t.Fatalf("load=%v: %v", caps.load, err)
		}
		c := start(t, d, agent.StartRequest{Session: "s1"})
		if got := lastResult(t, runTurn(t, c, "hi")); got.Stop != agent.StopEndTurn {
			t.Fatalf("result %+v", got)
		}
		a.nextProc(t)
		select {
		case <-a.procs:
			t.Fatal("a second process started")
		default:
		}
	}
}

// TestStopCloses: Stop cancels the running turn and closes the session
// (session/close); the process serves on.
func TestStopCloses(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{close: true, load: true})
	d, _ := newDriver(t, a, nil)
	a.script(func(t *fakeTurn) string {
		t.say("m", "working")
		<-t.cancelled
		return "cancelled"
	})
	c1 := start(t, d, agent.StartRequest{Session: "s1"})
	c2 := start(t, d, agent.StartRequest{Session: "s2"})
	p := a.nextProc(t)
	if err := c1.Send(t.Context(), "work"); err != nil {
		t.Fatal(err)
	}
	collect(t, c1, func(e agent.Event) bool { _, ok := e.(agent.TextDelta); return ok })
	if err := c1.Stop(); err != nil {
		t.Fatal(err)
	}
	<-c1.Done()
	if c1.Err() != nil {
		t.Fatalf("Err %v", c1.Err())
	}
	if n := len(p.sent("session/cancel")); n != 1 {
		t.Fatalf("%d session/cancel", n)
	}
	cl := p.sent("session/close")
	if len(cl) != 1 || !strings.Contains(string(cl[0].Params), c1.ID()) {
		t.Fatalf("session/close %v", cl)
	}
	a.script(nil)
	if got := lastResult(t, runTurn(t, c2, "still there?")); got.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", got)
	}
	// Closed, the session is loaded again by a later Start.
	start(t, d, agent.StartRequest{Session: "s1", Conversation: c1.ID(), Resume: true})
	if n := len(p.sent("session/load")); n != 1 {
		t.Fatalf("%d session/load", n)
	}
}

// TestStopWithoutClose: an agent without session/close keeps the session
// open; a later Start attaches to it again without a load.
func TestStopWithoutClose(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{load: true})
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	runTurn(t, c, "one")
	c.Stop()
	c2 := start(t, d, agent.StartRequest{Session: "s1", Conversation: c.ID(), Resume: true})
	if c2.ID() != c.ID() || len(p.sent("session/close")) != 0 || len(p.sent("session/load")) != 0 {
		t.Fatalf("ID %s; close %d, load %d", c2.ID(), len(p.sent("session/close")), len(p.sent("session/load")))
	}
	if got := lastResult(t, runTurn(t, c2, "two")); got.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", got)
	}
	if _, err := d.Start(t.Context(), agent.StartRequest{Session: "s1", Conversation: c.ID(), Resume: true}); err == nil {
		t.Fatal("a second conversation of a running session started")
	}
}

// TestInterrupt: Interrupt sends session/cancel; the turn ends cancelled.
func TestInterrupt(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, _ := newDriver(t, a, nil)
	a.script(func(t *fakeTurn) string {
		t.say("m", "a long")
		<-t.cancelled
		return "cancelled"
	})
	c := start(t, d, agent.StartRequest{Session: "s1"})
	if err := c.Send(t.Context(), "go"); err != nil {
		t.Fatal(err)
	}
	collect(t, c, func(e agent.Event) bool { _, ok := e.(agent.TextDelta); return ok })
	if err := c.Send(t.Context(), "meanwhile"); err == nil {
		t.Fatal("a second Send while a turn runs was taken")
	}
	if err := c.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isResult)
	want := []agent.Event{agent.Text{Block: 0, Text: "a long"}, agent.Result{Stop: agent.StopCancelled}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events %#v", got)
	}
	a.script(nil)
	if got := lastResult(t, runTurn(t, c, "again")); got.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", got)
	}
}

// TestCrash: the agent process dies mid-turn: every conversation on it
// ends with a Problem, an open permission request is withdrawn, and the
// next Start starts a process again and loads the conversation.
func TestCrash(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{load: true})
	d, opts := newDriver(t, a, nil)
	asked := make(chan struct{})
	a.script(func(t *fakeTurn) string {
		close(asked)
		t.ask("call1", "sleep 1000")
		return "end_turn"
	})
	c1 := start(t, d, agent.StartRequest{Session: "s1"})
	c2 := start(t, d, agent.StartRequest{Session: "s2"})
	p := a.nextProc(t)
	if err := c1.Send(t.Context(), "go"); err != nil {
		t.Fatal(err)
	}
	req := collect(t, c1, isPermission)
	rid := req[len(req)-1].(agent.PermissionRequest).RequestID
	p.kill(t)
	got := collect(t, c1, func(e agent.Event) bool { _, ok := e.(agent.PermissionCancel); return ok })
	if pc := got[len(got)-1].(agent.PermissionCancel); pc.RequestID != rid {
		t.Fatalf("withdrew %q, want %q", pc.RequestID, rid)
	}
	for _, c := range []agent.Conversation{c1, c2} {
		select {
		case <-c.Done():
		case <-time.After(waitLong):
			t.Fatal("a conversation outlived its process")
		}
		var pr *agent.Problem
		if !errors.As(c.Err(), &pr) || !strings.Contains(pr.Cause, "stopped unexpectedly") {
			t.Fatalf("Err %v", c.Err())
		}
	}
	if err := c1.Answer(rid, agent.Decision{Allow: true}); err == nil {
		t.Fatal("a withdrawn request was answered")
	}
	if _, err := os.Stat(filepath.Join(opts.StateDir, "agent.pid")); !os.IsNotExist(err) {
		t.Fatalf("pidfile after the crash: %v", err)
	}
	a.script(func(t *fakeTurn) string { t.say("m", "back"); return "end_turn" })
	c3 := start(t, d, agent.StartRequest{Session: "s1", Conversation: c1.ID(), Resume: true})
	p2 := a.nextProc(t)
	if len(p2.sent("session/load")) != 1 || p2.hello.PID == p.hello.PID {
		t.Fatalf("load %d; pid %d", len(p2.sent("session/load")), p2.hello.PID)
	}
	if txt := of[agent.Text](runTurn(t, c3, "again")); len(txt) != 1 || txt[0].Text != "back" {
		t.Fatalf("text %v", txt)
	}
}

// TestLeftoverReaped: a process a crashed parley left (its pidfile in
// StateDir) is stopped before the next one starts.
func TestLeftoverReaped(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	_, opts := newDriver(t, a, nil)
	crashed := New(opts) // never closed: parley "crashed"
	start(t, crashed, agent.StartRequest{Session: "s1"})
	old := a.nextProc(t)
	d := New(opts)
	t.Cleanup(func() { d.Close() })
	start(t, d, agent.StartRequest{Session: "s1"})
	select {
	case <-old.gone:
	case <-time.After(waitLong):
		t.Fatal("the leftover process still runs")
	}
	if agentproc.Live(old.hello.PID) {
		t.Fatalf("leftover %d lives", old.hello.PID)
	}
	rec, err := agentproc.ReadPidfile(filepath.Join(opts.StateDir, "agent.pid"))
	if p := a.nextProc(t); err != nil || rec.PID != p.hello.PID {
		t.Fatalf("pidfile %+v (%v), new pid %d", rec, err, p.hello.PID)
	}
}

// TestIdleStop: the process stops once no conversation used it for
// IdleTimeout; a Start before that keeps it.
func TestIdleStop(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, opts := newDriver(t, a, func(o *Options) { o.IdleTimeout = time.Hour })
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	c.Stop()
	start(t, d, agent.StartRequest{Session: "s2"})
	select {
	case p2 := <-a.procs:
		t.Fatalf("a second process (%d) for a Start within the idle time", p2.hello.PID)
	default:
	}
	if !agentproc.Live(p.hello.PID) {
		t.Fatal("the process stopped")
	}

	d2, _ := newDriver(t, a, func(o *Options) { *o = opts; o.IdleTimeout = time.Millisecond })
	c2 := start(t, d2, agent.StartRequest{Session: "s3"})
	p2 := a.nextProc(t)
	c2.Stop()
	select {
	case <-p2.gone:
	case <-time.After(waitLong):
		t.Fatal("the idle process still runs")
	}
}

// TestClose: the driver's Close ends its conversations (Err nil) and its
// process, and removes the pidfile and TMPDIR.
func TestClose(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, opts := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	d.Close()
	<-c.Done()
	<-p.gone
	if c.Err() != nil {
		t.Fatalf("Err %v", c.Err())
	}
	ents, _ := os.ReadDir(opts.StateDir)
	if len(ents) != 0 {
		t.Fatalf("left in StateDir: %v", ents)
	}
	if _, err := d.Start(t.Context(), agent.StartRequest{Session: "s1"}); err == nil {
		t.Fatal("Start after Close")
	}
}

// TestStartProblems: what people can fix is a Problem saying how.
func TestStartProblems(t *testing.T) {
	cases := []struct {
		name  string
		caps  fakeCaps
		edit  func(*Options)
		cause string
		fix   string
	}{
		{"missing", fakeCaps{}, func(o *Options) {
			o.Command, o.Install = "/nonexistent/opencode", "install OpenCode: npm install -g opencode-ai"
		}, `the agent command "/nonexistent/opencode" is not installed`, "install OpenCode: npm install -g opencode-ai, or set [agent] command (PARLEY_AGENT_COMMAND)"},
		{"missing named", fakeCaps{}, func(o *Options) {
			o.Command, o.CommandKey = "/nonexistent/codex-acp", "[agents.codex] command (PARLEY_AGENTS_CODEX_COMMAND)"
		}, "is not installed", "install the agent, or set [agents.codex] command (PARLEY_AGENTS_CODEX_COMMAND)"},
		{"not executable", fakeCaps{}, func(o *Options) {
			o.Command, o.CommandKey = "/etc/hostname", "[agents.my-agent] command"
		}, "cannot be run", "make it an executable ACP agent, or set [agents.my-agent] command"},
		{"workdir", fakeCaps{}, func(o *Options) { o.Workdir = "/nonexistent/dir" }, "working directory", "create it"},
		{"exits", fakeCaps{}, func(o *Options) { o.ExtraEnv = []string{relayEnv + "=/nonexistent/socket"} }, "exited as it started", "ACP"},
		{"silent", fakeCaps{silent: true}, func(o *Options) { o.CallTimeout = 100 * time.Millisecond }, "did not answer ACP's initialize", "opencode acp"},
		{"version", fakeCaps{version: 2}, nil, "speaks ACP version 2", "version 1"},
		{"login", fakeCaps{authRequired: true}, nil, "not logged in", "Run `fake login` in a terminal"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeAgent(t, tc.caps)
			d, _ := newDriver(t, a, tc.edit)
			_, err := d.Start(t.Context(), agent.StartRequest{Session: "s1"})
			var pr *agent.Problem
			if !errors.As(err, &pr) || !strings.Contains(pr.Cause, tc.cause) || !strings.Contains(pr.Fix, tc.fix) {
				t.Fatalf("err %v", err)
			}
			t.Logf("%s — %s (%v)", pr.Cause, pr.Fix, pr.Err)
		})
	}
}

// TestTools: parley's MCP server goes into session/new as http with the
// credential's headers where the agent speaks it, else as the stdio
// command with the credential in its environment.
func TestTools(t *testing.T) {
	tools := agent.Tools{URL: "http://127.0.0.1:1/mcp", Header: map[string]string{"Authorization": "Bearer s3cret", "X-A": "b"},
		Stdio: []string{"/bin/parley", "mcp", "--session", "s1"}, StdioEnv: []string{"PARLEY_TOKEN=s3cret"}}
	for _, http := range []bool{true, false} {
		a := newFakeAgent(t, fakeCaps{http: http})
		d, _ := newDriver(t, a, nil)
		start(t, d, agent.StartRequest{Session: "s1", Tools: tools})
		p := a.nextProc(t)
		var params struct {
			McpServers []json.RawMessage `json:"mcpServers"`
		}
		json.Unmarshal(p.sent("session/new")[0].Params, &params)
		want := `{"command":"/bin/parley","args":["mcp","--session","s1"],"env":[{"name":"PARLEY_TOKEN","value":"s3cret"}],"name":"parley"}`
		if http {
			want = `{"headers":[{"name":"Authorization","value":"Bearer s3cret"},{"name":"X-A","value":"b"}],"name":"parley","type":"http","url":"http://127.0.0.1:1/mcp"}`
		}
		if len(params.McpServers) != 1 || !jsonEqual(params.McpServers[0], want) {
			t.Fatalf("http=%v: %s", http, params.McpServers)
		}
	}
}

func jsonEqual(a json.RawMessage, b string) bool {
	var x, y any
	json.Unmarshal(a, &x)
	json.Unmarshal([]byte(b), &y)
	return reflect.DeepEqual(x, y)
}

// TestUnofferedRequests: the agent's fs/* and terminal/* requests (parley
// declared neither) and unknown ones are refused at once.
func TestUnofferedRequests(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	for _, m := range []string{"fs/read_text_file", "terminal/create", "x/unknown"} {
		_, ch := p.request(m, map[string]string{"sessionId": c.ID(), "path": "/etc/passwd"})
		select {
		case res := <-ch:
			if res != nil {
				t.Fatalf("%s answered %s", m, res)
			}
		case <-time.After(waitLong):
			t.Fatalf("%s not answered", m)
		}
	}
}

// TestPromptError: a prompt answered with an error, or with a stopReason
// ACP does not define, ends the turn StopError saying so; the others map
// to their own.
func TestPromptError(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	for stop, want := range map[string]agent.Result{
		"":                  {Stop: agent.StopError, Errors: []string{"the model failed"}},
		"exploded":          {Stop: agent.StopError, Errors: []string{`the agent ended the turn with stopReason "exploded"`}},
		"refusal":           {Stop: agent.StopRefusal},
		"max_tokens":        {Stop: agent.StopMaxTokens},
		"max_turn_requests": {Stop: agent.StopMaxTurns},
	} {
		a.script(func(*fakeTurn) string { return stop })
		if got := lastResult(t, runTurn(t, c, "hi")); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: %#v", stop, got)
		}
	}
}
