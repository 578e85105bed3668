package mcp

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// TestBoundConnectionFence: a connection bound to one session acts on that
// session only. Another session's id is a tool error, its inbox cannot be
// read or subscribed to, and the status and session list show the bound
// session alone; unbound connections still reach every session.
func TestBoundConnectionFence(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	mine, other := st.createSession("mine"), st.createSession("other")
	st.human(mine, "for me")
	st.human(other, "not for me")
	for _, tc := range []struct {
		name string
		o    connOptions
	}{
		{"query, 2025-11-25", connOptions{query: "session=" + string(mine)}},
		{"header, 2026-07-28", connOptions{modern: true, headers: map[string]string{SessionHeader: string(mine)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustDial(t, st.url, tc.o)
			fence := "bound to session " + string(mine)
			o := string(other)
			for _, call := range []struct {
				tool string
				args map[string]any
			}{
				{"chat_read_since", map[string]any{"session_id": o}},
				{"chat.human.post", map[string]any{"session_id": o, "content": "x"}},
				{"chat.assistant.post", map[string]any{"session_id": o, "content": "x"}},
				{"session.output", map[string]any{"session_id": o, "content": "x"}},
				{"loop.yield_turn", map[string]any{"session_id": o}},
				{"session.close", map[string]any{"session_id": o}},
				{"ui.ask", map[string]any{"session_id": o, "question": "?", "options": []string{"a"}, "timeout_s": 1}},
				{"ui.tool_call", map[string]any{"session_id": o, "call_id": "c1", "tool": "Bash"}},
				{"ui.tool_output", map[string]any{"session_id": o, "call_id": "c1", "stdout": "x"}},
				{"ui.request_approval", map[string]any{"session_id": o, "call_id": "c1", "tool": "Bash", "timeout_s": 1}},
				{"session.create", map[string]any{"title": "new"}},
			} {
				c.fails(t, call.tool, call.args, fence)
			}
			// Nothing reached the other session.
			msgs, err := st.store.Inbox(context.Background(), other, "", 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := contents(toWireAll(msgs)); !slices.Equal(got, []string{"not for me"}) {
				t.Fatalf("the other session's inbox: %v", got)
			}
			if s, err := st.store.Session(context.Background(), other); err != nil || s.Status == core.StatusClosed {
				t.Fatalf("the other session: %+v, %v", s, err)
			}

			// Its resources: not readable, not subscribable.
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			defer cancel()
			_, err = c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: SessionInboxURI(other)}})
			if err == nil || !strings.Contains(err.Error(), fence) {
				t.Fatalf("reading the other inbox: %v", err)
			}
			if !tc.o.modern {
				err = c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: SessionInboxURI(other)}})
				if err == nil || !strings.Contains(err.Error(), fence) {
					t.Fatalf("subscribing to the other inbox: %v", err)
				}
			}
			// The unbound inbox URI is this session's.
			if got := contents(c.readInbox(t, InboxURI).Messages); !slices.Equal(got, []string{"for me"}) {
				t.Fatalf("the inbox through a bound connection: %v", got)
			}
			var read InboxPage
			c.ok(t, "chat_read_since", nil, &read)
			if got := contents(read.Messages); !slices.Equal(got, []string{"for me"}) {
				t.Fatalf("chat_read_since: %v", got)
			}

			// The session list and the status show the bound session only.
			var list struct {
				Sessions []sessionInfo `json:"sessions"`
			}
			c.ok(t, "session.list", nil, &list)
			if len(list.Sessions) != 1 || list.Sessions[0].ID != mine {
				t.Fatalf("session.list: %+v", list.Sessions)
			}
			res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: AgentStatusURI}})
			if err != nil {
				t.Fatal(err)
			}
			var status statusBody
			if err := json.Unmarshal([]byte(res.Contents[0].(mcp.TextResourceContents).Text), &status); err != nil {
				t.Fatal(err)
			}
			for _, s := range status.Sessions {
				if s.SessionID != mine {
					t.Fatalf("status shows %s", s.SessionID)
				}
			}
		})
	}
	// Unbound, every session is reachable.
	u := mustDial(t, st.url, connOptions{})
	u.subscribe(t, SessionInboxURI(other))
	var post postResult
	u.ok(t, "chat.assistant.post", map[string]any{"session_id": string(other), "content": "hi"}, &post)
	if post.SessionID != other {
		t.Fatalf("unbound post went to %s", post.SessionID)
	}
}
