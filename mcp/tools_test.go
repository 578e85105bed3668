package mcp

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// aliases are the tools' names as listed: every dotted name has an
// underscore alias.
var toolNames = []string{
	"chat_read_since",
	"chat.human.post", "chat_human_post",
	"chat.assistant.post", "chat_assistant_post",
	"session.output", "session_output",
	"loop.yield_turn", "loop_yield_turn",
	"ui.ask", "ui_ask",
	"session.create", "session_create",
	"session.list", "session_list",
	"session.get", "session_get",
	"session.rename", "session_rename",
	"session.close", "session_close",
	"ui.tool_call", "ui_tool_call",
	"ui.tool_output", "ui_tool_output",
	"ui.request_approval", "ui_request_approval",
	"agent.state", "agent_state",
}

func TestToolList(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	c := mustDial(t, st.url, connOptions{modern: true})
	res, err := c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tool := range res.Tools {
		got = append(got, tool.Name)
	}
	slices.Sort(got)
	want := slices.Clone(toolNames)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	tmpl, err := c.ListResourceTemplates(context.Background(), mcp.ListResourceTemplatesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tmpl.ResourceTemplates) != 1 || tmpl.ResourceTemplates[0].URITemplate.Raw() != SessionInboxTemplate {
		t.Fatalf("templates %+v", tmpl.ResourceTemplates)
	}
}

// TestTools calls every tool under both of its names and checks the
// effect in the store.
func TestTools(t *testing.T) {
	for _, dotted := range []bool{true, false} {
		name := func(n string) string {
			if dotted {
				return n
			}
			return strings.ReplaceAll(n, ".", "_")
		}
		t.Run(name("dotted.or.underscore"), func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			c := mustDial(t, st.url, connOptions{})
			ctx := context.Background()

			var created struct {
				SessionID core.SessionID `json:"session_id"`
				Title     string         `json:"title"`
				Inbox     string         `json:"inbox"`
			}
			c.ok(t, name("session.create"), map[string]any{"title": "Tools"}, &created)
			if created.Title != "Tools" || created.Inbox != SessionInboxURI(created.SessionID) {
				t.Fatalf("session.create = %+v", created)
			}
			id := created.SessionID
			sid := map[string]any{"session_id": string(id)}
			with := func(kv ...any) map[string]any {
				m := map[string]any{"session_id": string(id)}
				for i := 0; i < len(kv); i += 2 {
					m[kv[i].(string)] = kv[i+1]
				}
				return m
			}

			var list struct {
				Sessions []sessionInfo `json:"sessions"`
			}
			c.ok(t, name("session.list"), nil, &list)
			if len(list.Sessions) != 1 || list.Sessions[0].ID != id || list.Sessions[0].Status != core.StatusIdle || list.Sessions[0].Title != "Tools" {
				t.Fatalf("session.list = %+v", list)
			}

			var hp, ap postResult
			c.ok(t, name("chat.human.post"), with("content", "a person's words", "mime", "text/plain"), &hp)
			c.ok(t, name("chat.assistant.post"), with("content", "**the agent**"), &ap)
			if hp.ID == "" || hp.TS.IsZero() || hp.SessionID != id || ap.ID <= hp.ID {
				t.Fatalf("posts %+v %+v", hp, ap)
			}
			msgs, err := st.store.Inbox(ctx, id, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 2 || msgs[0].Role != core.RoleUser || msgs[0].Origin != core.OriginMCP || msgs[0].Mime != "text/plain" ||
				msgs[1].Role != core.RoleAssistant || msgs[1].Mime != core.MimeMarkdown {
				t.Fatalf("inbox %+v", msgs)
			}

			c.ok(t, name("session.output"), with("content", "step 1"), nil)
			sess, _ := st.store.Session(ctx, id)
			if sess.Output != "step 1" || sess.OutputFinal || sess.Status != core.StatusWorking {
				t.Fatalf("after session.output: %+v", sess)
			}
			c.ok(t, name("session.output"), with("content", "done", "final", true), nil)
			c.ok(t, name("loop.yield_turn"), sid, nil)
			sess, _ = st.store.Session(ctx, id)
			if sess.Turn != 1 || sess.Status != core.StatusIdle || sess.Output != "" {
				t.Fatalf("after loop.yield_turn: %+v", sess)
			}

			var read InboxPage
			c.ok(t, "chat_read_since", with("after_id", string(hp.ID), "limit", 10), &read)
			if len(read.Messages) != 1 || read.Messages[0].ID != ap.ID || read.LastID != ap.ID {
				t.Fatalf("chat_read_since = %+v", read)
			}

			c.ok(t, name("session.close"), sid, nil)
			sess, _ = st.store.Session(ctx, id)
			if sess.Status != core.StatusClosed {
				t.Fatalf("after session.close: %+v", sess)
			}
		})
	}
}

// TestAsk: ui.ask blocks until a person answers (a button click: core.Answer
// with Option 1), and returns the option's text.
func TestAsk(t *testing.T) {
	for _, name := range []string{"ui.ask", "ui_ask"} {
		t.Run(name, func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			id := st.createSession("")
			c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
			questions, cancel := st.bus.Subscribe(16, false)
			defer cancel()
			answered := make(chan error, 1)
			go func() {
				for {
					select {
					case e := <-questions.C:
						if e.Kind != core.EventQuestion {
							continue
						}
						_, err := st.svc.Handle(context.Background(), core.Command{Kind: core.Answer, Session: id,
							Origin: core.OriginAPI, QuestionID: e.QuestionID, Option: 1})
						answered <- err
						return
					case <-time.After(waitFor):
						answered <- context.DeadlineExceeded
						return
					}
				}
			}()
			var res askResult
			c.ok(t, name, map[string]any{"question": "Deploy?", "options": []string{"Yes, deploy", "No"}}, &res)
			if err := <-answered; err != nil {
				t.Fatal(err)
			}
			if res.Answer != "Yes, deploy" || res.Option != 1 || res.SessionID != id || len(res.QuestionID) > 16 || res.MessageID == "" {
				t.Fatalf("ui.ask = %+v", res)
			}
			sess, _ := st.store.Session(context.Background(), id)
			if len(sess.Questions) != 0 {
				t.Fatalf("open questions %+v", sess.Questions)
			}
		})
	}
}

// TestAskEnds: ui.ask gives up at its timeout, and when the session is
// closed while it waits.
func TestAskEnds(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	c := mustDial(t, st.url, connOptions{modern: true})
	c.fails(t, "ui.ask", map[string]any{"question": "Still there?", "options": []string{"yes"}, "timeout_s": 0.2, "session_id": string(id)},
		"no answer within 0.2s; the question was withdrawn")

	questions, cancel := st.bus.Subscribe(16, false)
	defer cancel()
	go func() {
		for e := range questions.C {
			if e.Kind == core.EventQuestion {
				_, _ = st.svc.Handle(context.Background(), core.Command{Kind: core.Close, Session: id, Origin: core.OriginAPI})
				return
			}
		}
	}()
	c.fails(t, "ui.ask", map[string]any{"question": "Again?", "options": []string{"yes"}, "session_id": string(id)},
		"session was closed")
}

// TestBadCalls: every bad call gets an error result that says what is
// wrong, and nothing is stored.
func TestBadCalls(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	closed := st.createSession("")
	if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.Close, Session: closed, Origin: core.OriginAPI}); err != nil {
		t.Fatal(err)
	}
	missing := string(core.NewSessionID(time.Now()))
	c := mustDial(t, st.url, connOptions{})
	in := func(kv ...any) map[string]any {
		m := map[string]any{"session_id": string(id)}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
				continue
			}
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"chat.human.post", in("content", "hi", "session_id", missing), "unknown session " + missing},
		{"chat.human.post", in("content", "hi", "session_id", "x"), `unknown session "x"`},
		{"chat.assistant.post", in("content", "hi", "session_id", nil), "chat.assistant.post needs session_id"},
		{"chat.human.post", in("content", "  "), "content is empty"},
		{"chat_human_post", in(), "content is empty"},
		{"chat.assistant.post", in("content", strings.Repeat("x", 70<<10)), "chat.assistant.post: the message is 71680 bytes, more than the limit of 65536"},
		{"chat.assistant.post", in("content", "see", "files", []string{"relative.txt"}), "give an absolute path"},
		{"chat.assistant.post", in("content", "see", "files", []string{os.TempDir()}), "is not a regular file"},
		{"chat.assistant.post", in("content", "see", "files", []string{"/nonexistent/x"}), "no such file"},
		{"chat.human.post", in("content", "see", "files", []string{"/etc/hostname"}), "only be sent with chat.assistant.post"},
		{"chat.assistant.post", in("content", "hi", "session_id", string(closed)), "session " + string(closed) + " is closed"},
		{"chat.assistant.post", in("content", "hi", "text", "typo"), `unknown field "text"`},
		{"chat.assistant.post", in("content", 42), `bad arguments: field "content" must be a JSON string, not number`},
		{"chat_read_since", map[string]any{"after_id": "42"}, `after_id "42" is not a message id`},
		{"chat_read_since", map[string]any{"limit": 5000}, "limit 5000 is out of range"},
		{"chat_read_since", map[string]any{"session_id": missing}, "unknown session"},
		{"session.output", in("content", ""), "content is empty"},
		{"session.output", in("content", "x", "session_id", nil), "session.output needs session_id"},
		{"loop.yield_turn", map[string]any{}, "loop.yield_turn needs session_id"},
		{"session.close", map[string]any{"session_id": missing}, "unknown session"},
		{"ui.ask", in("question", "?", "options", []string{}), "options is empty"},
		{"ui.ask", in("question", "", "options", []string{"a"}), "question is empty"},
		{"ui.ask", in("question", "?", "options", []string{"a"}, "timeout_s", 7200), "timeout_s 7200 is out of range"},
		{"ui.ask", in("question", "?", "options", []string{"a", ""}), "ui.ask: option 2 must be 1 to 200 bytes"},
		{"session.create", map[string]any{"title": strings.Repeat("t", 300)}, "session.create: the title is longer than 256 bytes"},
	} {
		c.fails(t, tc.tool, tc.args, tc.want)
	}
	// Text that is not valid Unicode, sent as raw JSON: encoding/json
	// would store it as U+FFFD.
	for _, tc := range []struct{ raw, want string }{
		{`{"session_id":"` + string(id) + `","content":"a\ud800b"}`, `arguments refused: the text is not valid Unicode: a lone UTF-16 surrogate \ud800`},
		{`{"session_id":"` + string(id) + `","content":"\udfff"}`, `lone UTF-16 surrogate \udfff`},
		{"{\"session_id\":\"" + string(id) + "\",\"content\":\"a\xffb\"}", "a byte sequence that is not UTF-8"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), waitFor)
		res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "chat.human.post", Arguments: json.RawMessage(tc.raw)}})
		cancel()
		if err != nil {
			t.Fatalf("%q: %v", tc.raw, err)
		}
		text := ""
		for _, ct := range res.Content {
			if tc, ok := ct.(mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, tc.want) {
			t.Errorf("chat.human.post(%q) = %q (error %v), want an error containing %q", tc.raw, text, res.IsError, tc.want)
		}
	}
	msgs, err := st.store.Inbox(context.Background(), "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Mime != core.MimeControl { // the close above
			t.Fatalf("a bad call stored %+v", m)
		}
	}
	if _, err := c.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "no.such.tool"}}); err == nil {
		t.Fatal("calling an unknown tool succeeded")
	}
}

func TestIdempotentPosts(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("retries")
	c := mustDial(t, st.url, connOptions{})
	var first, retry, other struct {
		ID string `json:"id"`
	}
	args := map[string]any{"session_id": string(id), "content": "deployed", "idempotency_key": "deploy-42"}
	c.ok(t, "chat.assistant.post", args, &first)
	c.ok(t, "chat.assistant.post", args, &retry) // the client retried after a timeout
	c.ok(t, "chat.assistant.post", map[string]any{"session_id": string(id), "content": "deployed"}, &other)
	if first.ID == "" || retry.ID != first.ID || other.ID == first.ID {
		t.Errorf("ids %q, %q, %q: want the retry to return the first post and an unkeyed post to be new", first.ID, retry.ID, other.ID)
	}
	msgs, err := st.store.Inbox(context.Background(), id, "", 0)
	if err != nil || len(msgs) != 2 {
		t.Errorf("inbox has %d messages (%v), want 2", len(msgs), err)
	}
}
