package commands_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

func toolCmd(kind core.CommandKind, id core.SessionID, c core.ToolCall) core.Command {
	return core.Command{Kind: kind, Session: id, Origin: core.OriginMCP, Call: &c}
}

// TestToolCalls: a call and its output are one event each, stored with the
// turn; reporting either again is a duplicate that publishes nothing; an
// output for an unknown call is refused; output is tail-kept.
func TestToolCalls(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()

	e.handle(toolCmd(core.ToolCallStart, id, core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "make"}))
	evs := e.events()
	if got := kinds(evs); !slices.Equal(got, []core.EventKind{core.EventToolCall, core.EventSessionUpdated}) {
		t.Fatalf("events %v, want the call and the session working", got)
	}
	if c := evs[0].Call; c == nil || c.CallID != "c1" || c.Tool != "shell" || c.Cmd != "make" || evs[0].Seq == 0 {
		t.Fatalf("call event %+v", evs[0])
	}
	if s := e.session(id); s.Status != core.StatusWorking || len(s.Tools) != 1 || s.Tools[0].Done {
		t.Fatalf("session %s %+v", s.Status, s.Tools)
	}
	if res := e.handle(toolCmd(core.ToolCallStart, id, core.ToolCall{CallID: "c1", Tool: "other"})); !res.Duplicate {
		t.Fatalf("repeated call: %+v, want a duplicate", res)
	}

	out := strings.Repeat("x", core.MaxToolOutput) + "the end"
	code := 2
	e.handle(toolCmd(core.ToolCallOutput, id, core.ToolCall{CallID: "c1", Stdout: out, Stderr: "boom", ExitCode: &code}))
	evs = e.events()
	if len(evs) != 1 || evs[0].Kind != core.EventToolOutput {
		t.Fatalf("events %v: the repeated call published something, or the output nothing", kinds(evs))
	}
	c := evs[0].Call
	if c.Stderr != "boom" || *c.ExitCode != 2 || !strings.HasPrefix(c.Stdout, "… [7 bytes cut]\n") ||
		!strings.HasSuffix(c.Stdout, "the end") || len(c.Stdout) != core.MaxToolOutput+len("… [7 bytes cut]\n") {
		t.Fatalf("output event: stdout %d bytes %q…, stderr %q, exit %v", len(c.Stdout), c.Stdout[:20], c.Stderr, c.ExitCode)
	}
	if res := e.handle(toolCmd(core.ToolCallOutput, id, core.ToolCall{CallID: "c1", Stdout: "again"})); !res.Duplicate {
		t.Fatalf("repeated output: %+v, want a duplicate", res)
	}
	if s := e.session(id); !s.Tools[0].Done || !s.Tools[0].Failed() {
		t.Fatalf("tools %+v", s.Tools)
	}

	_, err := e.svc.Handle(context.Background(), toolCmd(core.ToolCallOutput, id, core.ToolCall{CallID: "nope"}))
	if msg, _ := delivery.UserMessage(err); !errors.Is(err, core.ErrInvalid) || !strings.Contains(msg, `unknown call_id "nope"`) {
		t.Fatalf("unknown call: %v (%q)", err, msg)
	}
	if got := e.events(); len(got) != 0 {
		t.Fatalf("refused and duplicate reports published %v", kinds(got))
	}
	for _, bad := range []core.ToolCall{{Tool: "x"}, {CallID: "c2"}, {CallID: "c2", Tool: "x", Cmd: strings.Repeat("c", core.MaxToolCmd+1)},
		{CallID: strings.Repeat("i", core.MaxToolName+1), Tool: "x"}} {
		if _, err := e.svc.Handle(context.Background(), toolCmd(core.ToolCallStart, id, bad)); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("call %+v: %v, want ErrInvalid", bad, err)
		}
	}
}

// TestToolCallShowsMore: a running call reported again with another
// command shows that one (the progress line and the ToolGroup read it);
// the same command again, or any once the call ended, changes nothing.
func TestToolCallShowsMore(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.handle(toolCmd(core.ToolCallStart, id, core.ToolCall{CallID: "c1", Tool: "bash"}))
	e.events()
	e.handle(toolCmd(core.ToolCallStart, id, core.ToolCall{CallID: "c1", Tool: "bash", Cmd: "ls -la"}))
	evs := e.events()
	if len(evs) != 1 || evs[0].Kind != core.EventToolCall || evs[0].Call.Cmd != "ls -la" || evs[0].Call.Tool != "bash" {
		t.Fatalf("events %+v", evs)
	}
	if s := e.session(id); s.Tools[0].Cmd != "ls -la" {
		t.Fatalf("the session shows %q", s.Tools[0].Cmd)
	}
	for _, again := range []core.ToolCall{{CallID: "c1", Tool: "bash", Cmd: "ls -la"}, {CallID: "c1", Tool: "bash"}} {
		if res := e.handle(toolCmd(core.ToolCallStart, id, again)); !res.Duplicate {
			t.Fatalf("%+v again: %+v, want a duplicate", again, res)
		}
	}
	e.handle(toolCmd(core.ToolCallOutput, id, core.ToolCall{CallID: "c1", Stdout: "x"}))
	e.events()
	if res := e.handle(toolCmd(core.ToolCallStart, id, core.ToolCall{CallID: "c1", Tool: "bash", Cmd: "rm -rf /"})); !res.Duplicate {
		t.Fatalf("an ended call shown otherwise: %+v", res)
	}
	if s := e.session(id); s.Tools[0].Cmd != "ls -la" || len(e.events()) != 0 {
		t.Fatalf("an ended call changed: %+v", s.Tools[0])
	}
}

// TestSessionToolsBounded: the session remembers its newest calls only.
func TestSessionToolsBounded(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	for i := range core.MaxSessionTools + 5 {
		e.handle(toolCmd(core.ToolCallStart, id, core.ToolCall{CallID: fmt.Sprint("c", i), Tool: "t"}))
	}
	s := e.session(id)
	if len(s.Tools) != core.MaxSessionTools || s.Tools[0].CallID != "c5" {
		t.Fatalf("%d tools, first %s", len(s.Tools), s.Tools[0].CallID)
	}
}

// TestApproval: an approval is a question with the three options; an
// allowed person's click records the decision on the call in the same
// transaction as the answer; a stranger's click and answers that are no
// decision change nothing; a withdrawn approval (its ui.request_approval
// timed out) leaves the call undecided and takes no late answer.
func TestApproval(t *testing.T) {
	e := newEnv(t, commands.Options{Allow: map[core.Origin][]string{"fake": {"42"}}})
	id := e.newSession()
	ask := func(call, qid string) {
		t.Helper()
		cmd := toolCmd(core.RequestApproval, id, core.ToolCall{CallID: call, Tool: "shell", Cmd: "rm -rf build"})
		cmd.QuestionID, cmd.Text = qid, "cleans the tree"
		e.handle(cmd)
	}
	ask("c1", "q1")
	evs := e.events()
	if got := kinds(evs); !slices.Equal(got, []core.EventKind{core.EventToolCall, core.EventSessionUpdated, core.EventQuestion, core.EventSessionUpdated}) {
		t.Fatalf("events %v", got)
	}
	q := evs[2]
	if q.QuestionID != "q1" || !slices.Equal(q.Options, delivery.ApprovalOptions) || !strings.Contains(q.Message.Content, "rm -rf build") ||
		!strings.Contains(q.Message.Content, "cleans the tree") {
		t.Fatalf("question %+v", q)
	}
	answer := func(actor string, opt int, text string) error {
		_, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Origin: "fake", Actor: core.Actor{ID: actor},
			Session: id, QuestionID: "q1", Option: opt, Text: text})
		return err
	}
	if err := answer("666", 1, ""); !errors.Is(err, core.ErrUnauthorized) {
		t.Fatalf("stranger's click: %v", err)
	}
	if err := answer("42", 0, "sure"); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("an answer that is no decision: %v", err)
	}
	if got := e.events(); len(got) != 0 {
		t.Fatalf("refused answers published %v", kinds(got))
	}
	if s := e.session(id); len(s.Questions) != 1 || s.Tools[0].Decision != "" {
		t.Fatalf("after refused answers: %+v %+v", s.Questions, s.Tools)
	}
	if err := answer("42", 3, ""); err != nil {
		t.Fatal(err)
	}
	evs = e.events()
	d := ofKind(evs, core.EventToolApproval)
	if len(d) != 1 || d[0].Call.Decision != core.DecisionDenyAbort || d[0].Call.CallID != "c1" || d[0].Call.Actor.ID != "42" ||
		len(ofKind(evs, core.EventAnswer)) != 1 {
		t.Fatalf("events %v, decision %+v", kinds(evs), d)
	}
	if s := e.session(id); s.Tools[0].Decision != core.DecisionDenyAbort || s.Tools[0].Question != "" || len(s.Questions) != 0 {
		t.Fatalf("session tools %+v", s.Tools)
	}
	// Decided once for all, for the call as it was asked about.
	cmd := toolCmd(core.RequestApproval, id, core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "rm -rf build"})
	cmd.QuestionID = "q9"
	if _, err := e.svc.Handle(context.Background(), cmd); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("asking again after the decision: %v", err)
	}

	t.Run("timeout", func(t *testing.T) {
		ask("c2", "q2")
		e.events()
		e.handle(core.Command{Kind: core.Withdraw, Session: id, Origin: core.OriginMCP, QuestionID: "q2", Text: core.QuestionExpired})
		if got := ofKind(e.events(), core.EventQuestionClosed); len(got) != 1 || got[0].QuestionID != "q2" {
			t.Fatalf("withdrawal events %+v", got)
		}
		_, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Origin: "fake", Actor: core.Actor{ID: "42"},
			Session: id, QuestionID: "q2", Option: 1})
		if !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("late click: %v", err)
		}
		if got := ofKind(e.events(), core.EventToolApproval); len(got) != 0 {
			t.Fatalf("late click decided %+v", got)
		}
		s := e.session(id)
		if i := core.FindTool(s.Tools, "c2"); s.Tools[i].Decision != "" || s.Status != core.StatusWorking || len(s.Questions) != 0 {
			t.Fatalf("after the timeout: %s %+v %+v", s.Status, s.Tools, s.Questions)
		}
	})
}
