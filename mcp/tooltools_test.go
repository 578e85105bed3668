package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// TestToolActivity: ui.tool_call and ui.tool_output under both names,
// idempotent by call_id, output bounded, an unknown call_id refused; the
// session's UIState shows one ToolGroup per call.
func TestToolActivity(t *testing.T) {
	for _, dotted := range []bool{true, false} {
		name := func(n string) string {
			if dotted {
				return n
			}
			return strings.ReplaceAll(n, ".", "_")
		}
		t.Run(name("ui.tool_call"), func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			id := st.createSession("")
			c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
			var res toolResult
			c.ok(t, name("ui.tool_call"), map[string]any{"call_id": "c1", "tool": "shell", "cmd": "go test ./..."}, &res)
			if !res.OK || res.Duplicate || res.CallID != "c1" || res.SessionID != id {
				t.Fatalf("ui.tool_call = %+v", res)
			}
			c.ok(t, name("ui.tool_call"), map[string]any{"call_id": "c1", "tool": "shell", "cmd": "go test ./..."}, &res)
			if !res.Duplicate {
				t.Fatalf("repeated ui.tool_call = %+v, want a duplicate", res)
			}
			c.ok(t, name("ui.tool_output"), map[string]any{"call_id": "c1", "stdout": strings.Repeat("o", 20<<10) + "END",
				"stderr": "FAIL", "exit_code": 1}, &res)
			c.ok(t, name("ui.tool_output"), map[string]any{"call_id": "c1", "stdout": "other"}, &res)
			if !res.Duplicate {
				t.Fatalf("repeated ui.tool_output = %+v, want a duplicate", res)
			}
			c.fails(t, name("ui.tool_output"), map[string]any{"call_id": "c9", "stdout": "x"}, `unknown call_id "c9"`)
			c.fails(t, name("ui.tool_output"), map[string]any{"call_id": "c1", "exit_code": 1.5}, "exit_code 1.5 is not a whole number")
			c.fails(t, name("ui.tool_call"), map[string]any{"call_id": "c2"}, "tool is empty")

			events, err := st.store.EventsSince(context.Background(), 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			s := uistate.ReduceAll(uistate.NewUIState(id), events)
			var groups []uistate.UIItem
			for _, it := range s.Items {
				if it.Type == uistate.UIItemToolGroup {
					groups = append(groups, it)
				}
			}
			if len(groups) != 1 {
				t.Fatalf("tool groups %+v", groups)
			}
			g := groups[0]
			if g.CallID != "c1" || g.Cmd != "go test ./..." || g.Stderr != "FAIL" || g.ExitCode == nil || *g.ExitCode != 1 ||
				!strings.HasSuffix(g.Stdout, "END") || len(g.Stdout) > core.MaxToolOutput+64 {
				t.Fatalf("group %+v", g.UIToolGroup)
			}
		})
	}
}

// answerNextApproval answers the next approval question on the bus with
// option opt, as a click from a UI would.
func answerNextApproval(t *testing.T, st *stack, id core.SessionID, opt int) <-chan error {
	t.Helper()
	questions, cancel := st.bus.Subscribe(16, false)
	answered := make(chan error, 1)
	go func() {
		defer cancel()
		for {
			select {
			case e := <-questions.C:
				if e.Kind != core.EventQuestion {
					continue
				}
				_, err := st.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Session: id,
					Origin: core.OriginAPI, QuestionID: e.QuestionID, Option: opt})
				answered <- err
				return
			case <-time.After(waitFor):
				answered <- context.DeadlineExceeded
				return
			}
		}
	}()
	return answered
}

// TestRequestApproval: the decision of the person's click is returned and
// recorded; asked again, the decision stands without a new question.
func TestRequestApproval(t *testing.T) {
	for i, name := range []string{"ui.request_approval", "ui_request_approval"} {
		t.Run(name, func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			id := st.createSession("")
			c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
			answered := answerNextApproval(t, st, id, 2+i)
			var res approvalResult
			args := map[string]any{"call_id": "c1", "tool": "shell", "cmd": "rm -rf /tmp/x", "reason": "cleanup"}
			c.ok(t, name, args, &res)
			if err := <-answered; err != nil {
				t.Fatal(err)
			}
			want := []string{core.DecisionDenyContinue, core.DecisionDenyAbort}[i]
			if res.Decision != want || res.CallID != "c1" || res.SessionID != id {
				t.Fatalf("%s = %+v, want %s", name, res, want)
			}
			c.ok(t, name, args, &res)
			if res.Decision != want {
				t.Fatalf("asked again: %+v", res)
			}
			sess, _ := st.store.Session(context.Background(), id)
			if len(sess.Questions) != 0 || sess.Tools[0].Decision != want {
				t.Fatalf("session questions %+v tools %+v", sess.Questions, sess.Tools)
			}
		})
	}
}

// TestRequestApprovalTimeout: nobody decides: the result says timeout, never
// approve, and the question is withdrawn (closed as expired in the
// timeline) so a late click decides nothing.
func TestRequestApprovalTimeout(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	c := mustDial(t, st.url, connOptions{modern: true})
	var res approvalResult
	c.ok(t, "ui.request_approval", map[string]any{"call_id": "c1", "tool": "deploy", "timeout_s": 0.2, "session_id": string(id)}, &res)
	if res.Decision != DecisionTimeout {
		t.Fatalf("ui.request_approval = %+v, want a timeout", res)
	}
	sess, _ := st.store.Session(context.Background(), id)
	if len(sess.Questions) != 0 || sess.Tools[0].Decision != "" || sess.Tools[0].Question != "" {
		t.Fatalf("after the timeout: questions %+v tools %+v", sess.Questions, sess.Tools)
	}
	events, err := st.store.EventsSince(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range uistate.ReduceAll(uistate.NewUIState(id), events).Items {
		if it.Type == uistate.UIItemQuestion && it.Closed != core.QuestionExpired {
			t.Fatalf("the approval question is shown %+v, want it closed as expired", it)
		}
	}
	c.fails(t, "ui.request_approval", map[string]any{"call_id": "c2", "tool": "deploy", "timeout_s": 0, "session_id": string(id)}, "timeout_s 0 is out of range")
	c.fails(t, "ui.request_approval", map[string]any{"call_id": "", "tool": "deploy", "session_id": string(id)}, "call_id is empty")
}

// TestApprovedBy: ui.tool_call's approved_by (a call parley approved
// without asking people) is taken from parley's own client alone, and
// recorded once as the call's approval by parley; it decides nothing for
// a question about the call. From any other client it is refused and
// nothing is recorded.
func TestApprovedBy(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	args := map[string]any{"call_id": "c1", "tool": "shell", "cmd": "touch f", "approved_by": `permissions = "allow"`}
	other := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
	other.fails(t, "ui.tool_call", args, "own orchestrator only")
	impostor := mustDial(t, st.url, connOptions{query: "session=" + string(id), headers: map[string]string{ownClientHeader: "guessed"}})
	impostor.fails(t, "ui.tool_call", args, "own orchestrator only")
	name, value := st.srv.OwnClientHeader()
	own := mustDial(t, st.url, connOptions{query: "session=" + string(id), headers: map[string]string{name: value}})
	var res toolResult
	own.ok(t, "ui.tool_call", args, &res)
	own.ok(t, "ui.tool_call", args, &res)
	if !res.Duplicate {
		t.Fatalf("repeated = %+v, want a duplicate", res)
	}
	events, err := st.store.EventsSince(context.Background(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var approvals []core.ToolCall
	for _, e := range events {
		if e.Kind == core.EventToolApproval {
			approvals = append(approvals, *e.Call)
		}
	}
	if len(approvals) != 1 || approvals[0].Decision != core.DecisionApprove ||
		approvals[0].Actor != (core.Actor{ID: "parley", Name: `parley (permissions = "allow")`}) {
		t.Fatalf("approvals %+v", approvals)
	}
	sess, err := st.store.Session(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if d := sess.Tools[0].DecidedFor((core.ToolCall{CallID: "c1", Tool: "shell", Cmd: "touch f"}).Digest()); d != "" {
		t.Fatalf("the record decides a question about the call: %q", d)
	}
}
