package commands_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// approve asks the session's people to approve call (question qid) and
// fails the test when the request is refused.
func (e *env) approve(id core.SessionID, qid string, call core.ToolCall) {
	e.tb.Helper()
	cmd := toolCmd(core.RequestApproval, id, call)
	cmd.QuestionID = qid
	e.handle(cmd)
}

// decide answers question qid with option n, as a button does.
func (e *env) decide(id core.SessionID, qid string, n int) {
	e.tb.Helper()
	e.handle(core.Command{Kind: core.Answer, Origin: "fake", Actor: core.Actor{ID: "42"}, Session: id, QuestionID: qid, Option: n})
}

// TestTypedTextDecidesNoApproval: while an approval is open, what a person
// (or a tool, or an agent over MCP) types — its option's number, its
// label — is a message to the agent: the call stays undecided, the
// question open, and nothing is lost. A person on a platform is told how
// approvals are answered, only where they wrote; a tool or an agent is
// not.
func TestTypedTextDecidesNoApproval(t *testing.T) {
	for _, tc := range []struct {
		origin core.Origin
		text   string
		hint   bool
	}{
		{"fake", "1", true},
		{"fake", " 3 ", true},
		{"fake", "Approve", true},
		{core.OriginAPI, "1", false},
		{core.OriginMCP, "1", false},
	} {
		t.Run(string(tc.origin)+" "+strings.TrimSpace(tc.text), func(t *testing.T) {
			e := newEnv(t, commands.Options{})
			id := e.newSession()
			e.approve(id, "q1", core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "rm -rf ~"})
			e.events()

			res := e.handle(msg(id, tc.origin, tc.text))
			evs := e.events()
			if d := ofKind(evs, core.EventToolApproval); len(d) != 0 {
				t.Fatalf("a typed %q decided: %+v", tc.text, d[0].Call)
			}
			if len(ofKind(evs, core.EventAnswer)) != 0 {
				t.Fatalf("a typed %q answered the approval: %v", tc.text, kinds(evs))
			}
			m := ofKind(evs, core.EventHumanMessage)
			if len(m) != 1 || m[0].Message.Content != tc.text || res.Message.Content != tc.text || res.Message.Mime != core.MimeMarkdown {
				t.Fatalf("the message: events %+v, stored %+v", m, res.Message)
			}
			if in := e.inbox(id); in[len(in)-1].ID != res.Message.ID {
				t.Fatalf("the message is not the inbox's newest: %+v", in)
			}
			s := e.session(id)
			if len(s.Questions) != 1 || s.Questions[0].ID != "q1" || s.Tools[0].Decision != "" || s.Tools[0].Question != "q1" {
				t.Fatalf("after the typed answer: questions %+v tools %+v", s.Questions, s.Tools)
			}
			n := ofKind(evs, core.EventNotice)
			if !tc.hint {
				if len(n) != 0 {
					t.Fatalf("origin %s was told %+v", tc.origin, n)
				}
				return
			}
			if len(n) != 1 || !n[0].SourceOnly || n[0].Origin != tc.origin || !strings.Contains(n[0].Message.Content, "only on its question") {
				t.Fatalf("the person was told %+v, want one source-only hint", n)
			}
			// A button still decides.
			e.decide(id, "q1", 2)
			if d := ofKind(e.events(), core.EventToolApproval); len(d) != 1 || d[0].Call.Decision != core.DecisionDenyContinue {
				t.Fatalf("the click decided %+v", d)
			}
		})
	}
}

// TestTypedNumberAnswersPlainQuestion: a number still answers the newest
// open question when that is a plain one (ui.ask), even with an approval
// open before it; once the approval is the newest, a number is a message.
func TestTypedNumberAnswersPlainQuestion(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.approve(id, "q1", core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "make"})
	e.handle(core.Command{Kind: core.Ask, Origin: core.OriginMCP, Session: id, QuestionID: "q2", Text: "Where to?", Options: []string{"staging", "production"}})
	e.events()

	if res := e.handle(msg(id, "fake", "2")); res.Message.Content != "production" || res.Message.Mime != core.MimeAnswer {
		t.Fatalf("stored %+v, want the answer production", res.Message)
	}
	evs := e.events()
	if a := ofKind(evs, core.EventAnswer); len(a) != 1 || a[0].QuestionID != "q2" || len(ofKind(evs, core.EventToolApproval)) != 0 {
		t.Fatalf("events %v, want q2 answered and no decision", kinds(evs))
	}
	if res := e.handle(msg(id, "fake", "1")); res.Message.Content != "1" || res.Message.Mime != core.MimeMarkdown {
		t.Fatalf("stored %+v, want the message as typed", res.Message)
	}
	if s := e.session(id); len(s.Questions) != 1 || s.Questions[0].ID != "q1" || s.Tools[0].Decision != "" {
		t.Fatalf("questions %+v tools %+v, want the approval open and undecided", s.Questions, s.Tools)
	}
}

// TestDecisionBelongsToItsCall: a decision is recorded for the call as it
// was asked about (tool, command, input). The same call id asked about
// anything else is a new question, whose answer is the call's decision
// from then on; asked the same, it is refused as decided (ui.request_approval
// returns the decision without asking). Input is compared as canonical JSON.
func TestDecisionBelongsToItsCall(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	harmless := core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "echo harmless"}
	e.approve(id, "q1", harmless)
	e.decide(id, "q1", 1)
	e.events()
	if s := e.session(id); s.Tools[0].DecidedFor(harmless.Digest()) != core.DecisionApprove {
		t.Fatalf("the approval is recorded as %+v", s.Tools[0])
	}

	again := func(qid string, c core.ToolCall) error {
		cmd := toolCmd(core.RequestApproval, id, c)
		cmd.QuestionID = qid
		_, err := e.svc.Handle(context.Background(), cmd)
		return err
	}
	if err := again("q2", harmless); !errors.Is(err, core.ErrInvalid) {
		t.Fatalf("the same call asked again: %v, want it refused as decided", err)
	}
	harmful := core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "rm -rf ~"}
	if err := again("q3", harmful); err != nil {
		t.Fatalf("the call id asked about another command: %v", err)
	}
	evs := e.events()
	if len(ofKind(evs, core.EventToolApproval)) != 0 || len(ofKind(evs, core.EventQuestion)) != 1 {
		t.Fatalf("events %v, want a new question and no decision", kinds(evs))
	}
	s := e.session(id)
	if len(s.Questions) != 1 || s.Questions[0].Call != "c1" || s.Questions[0].Digest != harmful.Digest() || !strings.Contains(s.Questions[0].Text, "rm -rf ~") {
		t.Fatalf("questions %+v", s.Questions)
	}
	if t0 := s.Tools[0]; t0.DecidedFor(harmful.Digest()) != "" || t0.Question != "q3" || t0.Cmd != "rm -rf ~" || s.Status != core.StatusWaiting {
		t.Fatalf("the call %+v (status %s), want it waiting, undecided for the new command, shown with it", t0, s.Status)
	}
	e.decide(id, "q3", 3)
	d := ofKind(e.events(), core.EventToolApproval)
	if len(d) != 1 || d[0].Call.CallID != "c1" || d[0].Call.Decision != core.DecisionDenyAbort {
		t.Fatalf("decisions %+v", d)
	}
	if t0 := e.session(id).Tools[0]; t0.DecidedFor(harmful.Digest()) != core.DecisionDenyAbort || t0.Question != "" {
		t.Fatalf("the call %+v", t0)
	}

	t.Run("input", func(t *testing.T) {
		write := func(in string) core.ToolCall {
			return core.ToolCall{CallID: "w1", Tool: "Write", Cmd: "notes.txt", Input: []byte(in)}
		}
		e.approve(id, "q4", write(`{"file_path":"notes.txt","content":"hello"}`))
		e.decide(id, "q4", 1)
		e.events()
		if err := again("q5", write(` { "content" : "hello", "file_path":"notes.txt"}`)); !errors.Is(err, core.ErrInvalid) {
			t.Fatalf("the same input written otherwise: %v, want it decided", err)
		}
		if err := again("q6", write(`{"file_path":"notes.txt","content":"rm -rf ~"}`)); err != nil {
			t.Fatalf("other input under the same call id and command: %v, want it asked", err)
		}
		if q := ofKind(e.events(), core.EventQuestion); len(q) != 1 || q[0].QuestionID != "q6" {
			t.Fatalf("questions %+v", q)
		}
	})
}

// TestApprovalsFromBeforeDigests: a session stored before approvals named
// their call and digest still has them. Its open approval takes no typed
// number; its decision, which has no digest, stands for no request: the
// call is asked about again.
func TestApprovalsFromBeforeDigests(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.approve(id, "q1", core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "make"})
	e.approve(id, "q2", core.ToolCall{CallID: "c2", Tool: "shell", Cmd: "make install"})
	e.decide(id, "q2", 1)
	// As such a session was stored: no Call or Digest on the question,
	// none with the decision.
	_, _, err := e.st.UpdateSession(context.Background(), id, func(s *core.Session) error {
		s.Questions = slices.Clone(s.Questions)
		s.Tools = slices.Clone(s.Tools)
		for i := range s.Questions {
			s.Questions[i].Call, s.Questions[i].Digest = "", ""
		}
		for i := range s.Tools {
			s.Tools[i].Digest = ""
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.events()

	e.handle(msg(id, "fake", "1"))
	evs := e.events()
	if len(ofKind(evs, core.EventToolApproval)) != 0 || len(ofKind(evs, core.EventHumanMessage)) != 1 || len(ofKind(evs, core.EventNotice)) != 1 {
		t.Fatalf("a typed 1 to an approval of before: %v", kinds(evs))
	}
	e.decide(id, "q1", 1)
	if d := ofKind(e.events(), core.EventToolApproval); len(d) != 1 || d[0].Call.CallID != "c1" {
		t.Fatalf("the click on an approval of before decided %+v", d)
	}
	e.approve(id, "q3", core.ToolCall{CallID: "c2", Tool: "shell", Cmd: "make install"})
	if q := ofKind(e.events(), core.EventQuestion); len(q) != 1 {
		t.Fatalf("a call decided before digests is not asked again: %v", q)
	}
}

// TestAlwaysAllow: where the agent offers to remember an approval, its
// question has a fourth option, Always allow, whose choice records
// approve_always on the call (and in its ToolGroup's event); a question
// that did not offer it is not answered by it.
func TestAlwaysAllow(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.newSession()
	e.approve(id, "q1", core.ToolCall{CallID: "c1", Tool: "bash", Cmd: "npm test", CanAlways: true})
	if q := e.session(id).Questions; len(q) != 1 || !slices.Equal(q[0].Options, []string{"Approve", "Deny and continue", "Deny and abort", "Always allow"}) {
		t.Fatalf("questions %+v", q)
	}
	e.events()
	e.decide(id, "q1", 4)
	d := ofKind(e.events(), core.EventToolApproval)
	if len(d) != 1 || d[0].Call.Decision != core.DecisionApproveAlways || d[0].Call.CallID != "c1" {
		t.Fatalf("decisions %+v", d)
	}
	if tools := e.session(id).Tools; tools[0].Decision != core.DecisionApproveAlways {
		t.Fatalf("tools %+v", tools)
	}

	e.approve(id, "q2", core.ToolCall{CallID: "c2", Tool: "bash", Cmd: "rm -rf ~"})
	if q := e.session(id).Questions; len(q) != 1 || len(q[0].Options) != 3 {
		t.Fatalf("questions %+v", q)
	}
	for _, answer := range []string{"Always allow", "approve_always", "4"} {
		_, err := e.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Origin: "fake", Actor: core.Actor{ID: "42"},
			Session: id, QuestionID: "q2", Text: answer})
		if !errors.Is(err, core.ErrInvalid) {
			t.Errorf("%q answered a question that did not offer it: %v", answer, err)
		}
	}
	if tools := e.session(id).Tools; tools[1].Decision != "" || tools[1].Question != "q2" {
		t.Fatalf("the call was decided: %+v", tools[1])
	}
}
