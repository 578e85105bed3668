package mcp

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// approvalInBackground calls ui.request_approval on c in a goroutine; its
// result, or the failure, arrives on the channel.
func approvalInBackground(c *conn, args map[string]any) <-chan approvalOutcome {
	out := make(chan approvalOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		defer cancel()
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "ui.request_approval", Arguments: args}})
		var o approvalOutcome
		switch {
		case err != nil:
			o.text = err.Error()
		case res.IsError:
			o.text = "error result"
		default:
			if t, ok := res.Content[0].(mcp.TextContent); ok {
				o.text = t.Text
				_ = json.Unmarshal([]byte(t.Text), &o.res)
			}
		}
		out <- o
	}()
	return out
}

type approvalOutcome struct {
	res  approvalResult
	text string
}

// openApproval waits until session id has an open question (the
// approval) and returns it.
func openApproval(t *testing.T, st *stack, id core.SessionID) core.Question {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		sess, err := st.store.Session(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(sess.Questions) > 0 {
			return sess.Questions[0]
		}
		select {
		case <-deadline:
			t.Fatal("no approval was asked")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestHumanPostDecidesNoApproval: with an approval open, chat.human.post
// "1" (or "Approve") is a message in the inbox, not a decision: the call
// stays undecided and the question open, until a person's click decides.
// What an agent posts never approves its own call.
func TestHumanPostDecidesNoApproval(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
	result := approvalInBackground(c, map[string]any{"call_id": "c1", "tool": "shell", "cmd": "rm -rf ~"})
	q := openApproval(t, st, id)

	for _, text := range []string{"1", "Approve"} {
		var posted postResult
		c.ok(t, "chat.human.post", map[string]any{"content": text}, &posted)
		sess, _ := st.store.Session(context.Background(), id)
		if len(sess.Questions) != 1 || sess.Tools[0].Decision != "" {
			t.Fatalf("after chat.human.post %q: questions %+v tools %+v, want the approval open and undecided", text, sess.Questions, sess.Tools)
		}
		msgs, _ := st.store.Inbox(context.Background(), id, "", 0)
		if m := msgs[len(msgs)-1]; m.ID != posted.ID || m.Content != text || m.Role != core.RoleUser || m.Mime != core.MimeMarkdown {
			t.Fatalf("the inbox ends with %+v, want the post %q as a message", m, text)
		}
	}
	if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Session: id, Origin: "fake",
		QuestionID: q.ID, Option: 3}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-result:
		if o.res.Decision != core.DecisionDenyAbort {
			t.Fatalf("ui.request_approval = %s, want the click's deny_abort", o.text)
		}
	case <-time.After(waitFor):
		t.Fatal("ui.request_approval did not return after the click")
	}
}

// TestDecisionIsForTheCallAsked: a decision stands for the call it was
// given for. The same call_id asked about another command (or other input)
// is put to people again and gets their new answer; asked about the very
// same call, the decision is returned without a question.
func TestDecisionIsForTheCallAsked(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
	ask := func(args map[string]any, opt int) approvalResult {
		t.Helper()
		answered := answerNextApproval(t, st, id, opt)
		var res approvalResult
		c.ok(t, "ui.request_approval", args, &res)
		if err := <-answered; err != nil {
			t.Fatalf("no question was asked for %v: %v", args, err)
		}
		return res
	}
	harmless := map[string]any{"call_id": "c1", "tool": "shell", "cmd": "echo harmless"}
	if res := ask(harmless, 1); res.Decision != core.DecisionApprove {
		t.Fatalf("first decision %+v", res)
	}
	harmful := map[string]any{"call_id": "c1", "tool": "shell", "cmd": "rm -rf ~"}
	if res := ask(harmful, 2); res.Decision != core.DecisionDenyContinue {
		t.Fatalf("the reused call_id with another command = %+v, want the people's new answer", res)
	}
	var res approvalResult
	c.ok(t, "ui.request_approval", harmful, &res)
	if sess, _ := st.store.Session(context.Background(), id); res.Decision != core.DecisionDenyContinue || len(sess.Questions) != 0 {
		t.Fatalf("the same call asked again = %+v with questions %+v, want its decision without a question", res, sess.Questions)
	}

	write := func(content string) map[string]any {
		return map[string]any{"call_id": "w1", "tool": "Write", "cmd": "notes.txt",
			"input": map[string]any{"file_path": "notes.txt", "content": content}, "timeout_s": 0.2}
	}
	if res := ask(write("hello"), 1); res.Decision != core.DecisionApprove {
		t.Fatalf("the write = %+v", res)
	}
	c.ok(t, "ui.request_approval", write("hello"), &res)
	if res.Decision != core.DecisionApprove {
		t.Fatalf("the same write asked again = %+v", res)
	}
	c.ok(t, "ui.request_approval", write("rm -rf ~"), &res)
	if res.Decision != DecisionTimeout {
		t.Fatalf("the call_id with other input = %+v, want it asked (and nobody answering, a timeout)", res)
	}
	args := write("x")
	args["input"] = []string{"not", "an", "object"}
	c.fails(t, "ui.request_approval", args, "input is not an object")
}

// TestApprovalAlways: asked with always, the approval offers Always allow
// fourth, and its choice is the decision approve_always; asked without,
// it offers the three decisions only.
func TestApprovalAlways(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
	result := approvalInBackground(c, map[string]any{"call_id": "c1", "tool": "bash", "cmd": "npm test", "always": true})
	q := openApproval(t, st, id)
	if len(q.Options) != 4 || q.Options[3] != "Always allow" {
		t.Fatalf("options %q", q.Options)
	}
	if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Session: id, Origin: "fake",
		QuestionID: q.ID, Option: 4}); err != nil {
		t.Fatal(err)
	}
	select {
	case o := <-result:
		if o.res.Decision != core.DecisionApproveAlways {
			t.Fatalf("ui.request_approval = %s, want approve_always", o.text)
		}
	case <-time.After(waitFor):
		t.Fatal("ui.request_approval did not return after the click")
	}
	result = approvalInBackground(c, map[string]any{"call_id": "c2", "tool": "bash", "cmd": "rm -rf ~"})
	if q := openApproval(t, st, id); len(q.Options) != 3 {
		t.Fatalf("without always: options %q", q.Options)
	}
	_ = result
}
