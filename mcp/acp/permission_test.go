//go:build linux

package acp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/parley-chat/parley/mcp/agent"
)

// askScript is OpenCode's shape of an asked shell call: the tool call,
// then the request; the outcome goes to outcomes, and a rejected or
// cancelled call ends the turn (as OpenCode 1.18.33 does).
func askScript(outcomes chan<- map[string]string) func(t *fakeTurn) string {
	return func(t *fakeTurn) string {
		t.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call1", "title": "bash", "kind": "execute", "status": "pending"})
		out := t.ask("call1", "ls -l")
		outcomes <- out
		if out["optionId"] == "once" || out["optionId"] == "always" {
			t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call1", "status": "completed",
				"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text", "text": "total 0\n"}}}})
			return "end_turn"
		}
		// A cancelled outcome comes after session/cancel: the fake then
		// answers the prompt cancelled.
		return "end_turn"
	}
}

// TestPermissionAnswers: each Decision selects the agent's option of its
// kind; "always" is offered (CanAlways).
func TestPermissionAnswers(t *testing.T) {
	cases := []struct {
		name   string
		d      agent.Decision
		option string
	}{
		{"allow once", agent.Decision{Allow: true}, "once"},
		{"always", agent.Decision{Allow: true, Always: true}, "always"},
		{"reject", agent.Decision{Message: "no"}, "reject"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeAgent(t, fakeCaps{})
			outcomes := make(chan map[string]string, 1)
			a.script(askScript(outcomes))
			d, _ := newDriver(t, a, nil)
			c := start(t, d, agent.StartRequest{Session: "s1"})
			if err := c.Send(t.Context(), "list"); err != nil {
				t.Fatal(err)
			}
			got := collect(t, c, isPermission)
			pr := got[len(got)-1].(agent.PermissionRequest)
			want := agent.PermissionRequest{RequestID: pr.RequestID, ToolName: "bash", ToolUseID: "call1", Description: "ls -l",
				Show: "ls -l", Input: json.RawMessage(`{"command":"ls -l"}`), CanAlways: true}
			if !reflect.DeepEqual(pr, want) {
				t.Fatalf("request %#v", pr)
			}
			if err := c.Answer(pr.RequestID, tc.d); err != nil {
				t.Fatal(err)
			}
			if out := <-outcomes; out["outcome"] != "selected" || out["optionId"] != tc.option {
				t.Fatalf("outcome %v", out)
			}
			rest := collect(t, c, isResult)
			if r := lastResult(t, rest); r.Stop != agent.StopEndTurn {
				t.Fatalf("result %+v", r)
			}
			if tc.d.Allow {
				if res := of[agent.ToolResult](rest); len(res) != 1 || res[0].Stdout != "total 0\n" {
					t.Fatalf("result %v", rest)
				}
			}
			if err := c.Answer(pr.RequestID, tc.d); err == nil {
				t.Fatal("answered twice")
			}
		})
	}
}

// TestPermissionRejectInterrupts: a denial with Interrupt rejects the call
// and cancels the turn, which ends StopDenied.
func TestPermissionRejectInterrupts(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	outcomes := make(chan map[string]string, 1)
	a.script(func(t *fakeTurn) string {
		out := t.ask("call1", "rm -rf /")
		outcomes <- out
		<-t.cancelled
		return "cancelled"
	})
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	if err := c.Send(t.Context(), "clean"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isPermission)
	if err := c.Answer(got[len(got)-1].(agent.PermissionRequest).RequestID, agent.Decision{Interrupt: true}); err != nil {
		t.Fatal(err)
	}
	if out := <-outcomes; out["optionId"] != "reject" {
		t.Fatalf("outcome %v", out)
	}
	if r := lastResult(t, collect(t, c, isResult)); r.Stop != agent.StopDenied {
		t.Fatalf("result %+v", r)
	}
	if n := len(p.sent("session/cancel")); n != 1 {
		t.Fatalf("%d session/cancel", n)
	}
}

// TestPermissionWithdrawn: a request still open when its prompt ends is
// withdrawn (PermissionCancel before the Result) and answered cancelled;
// Answer then fails. The call it asked about, which the agent had not
// reported (the driver reported it from the request), ends as not run.
func TestPermissionWithdrawn(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	answered := make(chan json.RawMessage, 1)
	a.script(func(t *fakeTurn) string {
		_, ch := t.p.request("session/request_permission", map[string]any{"sessionId": t.session,
			"toolCall": map[string]any{"toolCallId": "c1", "title": "touch x", "kind": "edit", "locations": []any{map[string]string{"path": "/w/x"}}},
			"options":  []any{map[string]string{"optionId": "ok", "kind": "allow_once", "name": "Allow"}}})
		go func() { answered <- <-ch }()
		return "end_turn" // without waiting for the answer

	})
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	a.nextProc(t)
	if err := c.Send(t.Context(), "touch"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isResult)
	prs := of[agent.PermissionRequest](got)
	if len(prs) != 1 || prs[0].Show != "/w/x" || prs[0].CanAlways {
		t.Fatalf("events %#v", got)
	}
	if uses := of[agent.ToolUse](got); len(uses) != 1 || uses[0].ID != "c1" || uses[0].Show != "/w/x" {
		t.Fatalf("tool uses %#v", got)
	}
	if pc := got[len(got)-3]; pc != (agent.PermissionCancel{RequestID: prs[0].RequestID}) {
		t.Fatalf("before the result: %#v", pc)
	}
	if res, ok := got[len(got)-2].(agent.ToolResult); !ok || res.ToolUseID != "c1" || !res.IsError || !strings.Contains(res.Stderr, "Not run") {
		t.Fatalf("the call's result: %#v", got[len(got)-2])
	}
	if res := <-answered; !jsonEqual(res, `{"outcome":{"outcome":"cancelled"}}`) {
		t.Fatalf("answered %s", res)
	}
	if err := c.Answer(prs[0].RequestID, agent.Decision{Allow: true}); err == nil {
		t.Fatal("a withdrawn request was answered")
	}
}

// TestInterruptWithdraws: Interrupt while a request waits sends
// session/cancel, then answers the request cancelled, as ACP asks; the
// question is withdrawn and the turn ends cancelled.
func TestInterruptWithdraws(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	outcomes := make(chan map[string]string, 1)
	a.script(askScript(outcomes))
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	p := a.nextProc(t)
	if err := c.Send(t.Context(), "list"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isPermission)
	rid := got[len(got)-1].(agent.PermissionRequest).RequestID
	if err := c.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	if out := <-outcomes; out["outcome"] != "cancelled" {
		t.Fatalf("outcome %v", out)
	}
	rest := collect(t, c, isResult)
	if rest[0] != (agent.PermissionCancel{RequestID: rid}) || lastResult(t, rest).Stop != agent.StopCancelled {
		t.Fatalf("events %#v", rest)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cancelAt, answerAt := -1, -1
	for i, m := range p.received {
		if m.Method == "session/cancel" && cancelAt < 0 {
			cancelAt = i
		}
		if m.Method == "" && len(m.Result) > 0 && answerAt < 0 {
			answerAt = i
		}
	}
	if cancelAt < 0 || answerAt < cancelAt {
		t.Fatalf("session/cancel at %d, the answer at %d", cancelAt, answerAt)
	}
}

// TestPermissionTellsCommand: OpenCode 1.18.33 under load asks about a
// shell call before the update that tells its command, and ends the
// denied call failed with no command: the request's command is what the
// call shows from then on (a ToolUpdate before the question), so people
// never read "bash" for the call they denied.
func TestPermissionTellsCommand(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	outcomes := make(chan map[string]string, 1)
	a.script(func(t *fakeTurn) string {
		t.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call1", "title": "bash", "kind": "execute",
			"status": "pending", "rawInput": map[string]any{}})
		out := t.ask("call1", "touch denied.txt")
		outcomes <- out
		t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call1", "status": "failed",
			"content": []any{map[string]any{"type": "content", "content": map[string]string{"type": "text",
				"text": "The user rejected permission to use this specific tool call."}}}})
		return "end_turn"
	})
	d, _ := newDriver(t, a, nil)
	c := start(t, d, agent.StartRequest{Session: "s1"})
	if err := c.Send(t.Context(), "touch"); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isPermission)
	pr := got[len(got)-1].(agent.PermissionRequest)
	if err := c.Answer(pr.RequestID, agent.Decision{Message: "no"}); err != nil {
		t.Fatal(err)
	}
	if out := <-outcomes; out["optionId"] != "reject" {
		t.Fatalf("outcome %v", out)
	}
	got = append(got, collect(t, c, isResult)...)
	want := []agent.Event{
		agent.ToolUse{ID: "call1", Name: "bash", Kind: "execute", Show: "bash", Input: json.RawMessage(`{}`)},
		agent.ToolUpdate{ID: "call1", Show: "touch denied.txt", Status: "pending"},
		agent.PermissionRequest{RequestID: pr.RequestID, ToolName: "bash", ToolUseID: "call1", Description: "touch denied.txt",
			Show: "touch denied.txt", Input: json.RawMessage(`{"command":"touch denied.txt"}`), CanAlways: true},
		agent.ToolResult{ToolUseID: "call1", IsError: true, Stderr: "The user rejected permission to use this specific tool call."},
		agent.Result{Stop: agent.StopEndTurn},
	}
	if got = got[len(got)-len(want):]; !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %#v\nwant %#v", got, want)
	}
}

// TestEndingUpdateTellsShow: an update that ends a call and tells what
// people read of it for the first time (its command) is a ToolUpdate
// before the ToolResult: the end of a call does not hide its command.
func TestEndingUpdateTellsShow(t *testing.T) {
	a := newFakeAgent(t, fakeCaps{})
	d, _ := newDriver(t, a, nil)
	a.script(func(t *fakeTurn) string {
		t.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call1", "title": "bash", "kind": "execute",
			"status": "pending", "rawInput": map[string]any{}})
		t.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call1", "status": "failed",
			"rawInput": map[string]string{"command": "false"}, "rawOutput": map[string]any{"output": "", "metadata": map[string]any{"exit": 1}}})
		return "end_turn"
	})
	c := start(t, d, agent.StartRequest{Session: "s1"})
	got := runTurn(t, c, "run")[1:]
	one := 1
	want := []agent.Event{
		agent.ToolUse{ID: "call1", Name: "bash", Kind: "execute", Show: "bash", Input: json.RawMessage(`{}`)},
		agent.ToolUpdate{ID: "call1", Show: "false", Status: "failed"},
		agent.ToolResult{ToolUseID: "call1", IsError: true, ExitCode: &one},
		agent.Result{Stop: agent.StopEndTurn},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("events\n got %#v\nwant %#v", got, want)
	}
}
