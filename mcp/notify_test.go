package mcp

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// TestNotifications runs the agent's loop with both protocol generations:
// subscribe, a person writes (through the Handler, as /api/chat does), the
// notification arrives with the message, chat_read_since reads it; an
// assistant message notifies nobody.
func TestNotifications(t *testing.T) {
	for _, modern := range []bool{false, true} {
		name := "2025-11-25"
		if modern {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			id := st.createSession("demo")
			c := mustDial(t, st.url, connOptions{modern: modern})
			c.subscribe(t, InboxURI)

			m := st.human(id, "hello agent")
			u := c.next(t)
			if u.URI != InboxURI || len(u.Messages) != 1 {
				t.Fatalf("update %+v", u)
			}
			got := u.Messages[0]
			if got.ID != m.ID || got.Content != "hello agent" || got.SessionID != id || got.Author != core.RoleUser || got.Mime != core.MimeMarkdown || got.TS.IsZero() {
				t.Fatalf("notified message %+v, stored %+v", got, m)
			}

			var read InboxPage
			c.ok(t, "chat_read_since", nil, &read)
			if len(read.Messages) != 1 || read.Messages[0].ID != m.ID || read.LastID != m.ID {
				t.Fatalf("chat_read_since = %+v", read)
			}

			st.assistant(id, "hello person")
			c.none(t)
			c.ok(t, "chat_read_since", map[string]any{"after_id": string(read.LastID)}, &read)
			if len(read.Messages) != 1 || read.Messages[0].Author != core.RoleAssistant {
				t.Fatalf("chat_read_since after the watermark = %+v", read)
			}
			if st.srv.Subscribers() != 1 {
				t.Fatalf("Subscribers() = %d", st.srv.Subscribers())
			}
		})
	}
}

// TestNotifyHumanEvents: answers and cancels are human input too; the
// agent's own posts and its own session.close are not.
func TestNotifyHumanEvents(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	c := mustDial(t, st.url, connOptions{query: "session=" + string(id)})
	c.subscribe(t, InboxURI)
	ctx := context.Background()

	c.ok(t, "chat.human.post", map[string]any{"content": "from a tool, for a person"}, nil)
	if u := c.next(t); u.Messages[0].Origin != core.OriginMCP {
		t.Fatalf("update %+v", u)
	}
	if _, err := st.svc.Handle(ctx, core.Command{Kind: core.Cancel, Session: id, Origin: core.OriginAPI}); err != nil {
		t.Fatal(err)
	}
	if u := c.next(t); u.Messages[0].Mime != core.MimeControl || u.Messages[0].Content != "cancel" {
		t.Fatalf("update %+v", u)
	}
	c.ok(t, "chat.assistant.post", map[string]any{"content": "mine"}, nil)
	c.ok(t, "session.output", map[string]any{"content": "working"}, nil)
	c.ok(t, "loop.yield_turn", nil, nil)
	c.ok(t, "session.close", nil, nil)
	c.none(t)
}

// TestBinding: ?session= and the Parley-Session header bind a connection;
// unbound connections span all sessions; the template addresses one.
func TestBinding(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	a, b := st.createSession("a"), st.createSession("b")
	byQuery := mustDial(t, st.url, connOptions{query: "session=" + string(a)})
	byHeader := mustDial(t, st.url, connOptions{modern: true, headers: map[string]string{SessionHeader: string(b)}})
	unbound := mustDial(t, st.url, connOptions{})
	byQuery.subscribe(t, InboxURI)
	byHeader.subscribe(t, InboxURI)
	unbound.subscribe(t, SessionInboxURI(b))

	st.human(a, "to a")
	if u := byQuery.next(t); u.Messages[0].Content != "to a" {
		t.Fatalf("bound by query: %+v", u)
	}
	st.human(b, "to b")
	if u := byHeader.next(t); u.URI != InboxURI || u.Messages[0].Content != "to b" {
		t.Fatalf("bound by header: %+v", u)
	}
	if u := unbound.next(t); u.URI != SessionInboxURI(b) || u.Messages[0].SessionID != b {
		t.Fatalf("template: %+v", u)
	}
	byQuery.none(t)
	byHeader.none(t)
	unbound.none(t)

	// The inbox resource follows the binding.
	if got := contents(byQuery.readInbox(t, InboxURI).Messages); !slices.Equal(got, []string{"to a"}) {
		t.Fatalf("bound inbox %v", got)
	}
	all := unbound.readInbox(t, InboxURI)
	if got := contents(all.Messages); !slices.Equal(got, []string{"to a", "to b"}) || all.Messages[0].SessionID != a || all.Messages[1].SessionID != b || all.LastID != all.Messages[1].ID {
		t.Fatalf("unbound inbox %+v", all)
	}
	if got := contents(byHeader.readInbox(t, SessionInboxURI(b)).Messages); !slices.Equal(got, []string{"to b"}) {
		t.Fatalf("template read %v", got)
	}
	if got := contents(unbound.readInbox(t, SessionInboxURI(a)).Messages); !slices.Equal(got, []string{"to a"}) {
		t.Fatalf("template read, unbound %v", got)
	}

	// Tools default to the bound session (and act on it only:
	// TestBoundConnectionFence).
	var post postResult
	byHeader.ok(t, "chat_assistant_post", map[string]any{"content": "reply"}, &post)
	if post.SessionID != b {
		t.Fatalf("posted to %s, want %s", post.SessionID, b)
	}
	byHeader.ok(t, "chat.assistant.post", map[string]any{"content": "reply", "session_id": string(b)}, &post)
	if post.SessionID != b {
		t.Fatalf("posted to %s, want %s", post.SessionID, b)
	}
	unbound.fails(t, "chat.assistant.post", map[string]any{"content": "where?"}, "needs session_id")
	var read InboxPage
	byHeader.ok(t, "chat_read_since", nil, &read)
	if got := contents(read.Messages); !slices.Equal(got, []string{"to b", "reply", "reply"}) {
		t.Fatalf("bound chat_read_since %v", got)
	}
}

// TestBindingErrors: a wrong binding fails the first request, saying why.
func TestBindingErrors(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	a := st.createSession("a")
	missing := core.NewSessionID(time.Now())
	for _, tc := range []struct {
		name string
		o    connOptions
		want string
	}{
		{"unknown by query", connOptions{query: "session=" + string(missing)}, "unknown session " + string(missing)},
		{"unknown by header, 2026", connOptions{modern: true, headers: map[string]string{SessionHeader: string(missing)}}, "unknown session"},
		{"not an id", connOptions{query: "session=nope"}, `unknown session "nope"`},
		{"conflict", connOptions{query: "session=" + string(a), headers: map[string]string{SessionHeader: string(missing)}}, "name different sessions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dial(t, st.url, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("dial: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestSubscriptions: bad URIs are refused, unsubscribing stops the
// notifications, and closing the connection drops the subscriber.
func TestSubscriptions(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	a := st.createSession("a")
	c := mustDial(t, st.url, connOptions{})
	ctx := context.Background()
	for _, uri := range []string{"ui://chat/elsewhere", SessionInboxURI(core.NewSessionID(time.Now())), "ui://chat/sessions//inbox"} {
		err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: uri}})
		if err == nil || !strings.Contains(err.Error(), "cannot subscribe") {
			t.Fatalf("subscribe %s: %v", uri, err)
		}
	}
	c.subscribe(t, InboxURI)
	if err := c.Unsubscribe(ctx, mcp.UnsubscribeRequest{Params: mcp.UnsubscribeParams{URI: InboxURI}}); err != nil {
		t.Fatal(err)
	}
	if n := st.srv.Subscribers(); n != 0 {
		t.Fatalf("Subscribers() = %d after unsubscribing", n)
	}
	st.human(a, "nobody listens")
	c.none(t)

	modern := mustDial(t, st.url, connOptions{modern: true})
	_, err := modern.ListenAsync(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{"ui://nope"}}, func(error) {})
	if err != nil {
		t.Fatal(err)
	}
	modern.none(t)
	if n := st.srv.Subscribers(); n != 0 {
		t.Fatalf("Subscribers() = %d after a refused listen", n)
	}

	c.subscribe(t, InboxURI)
	if n := st.srv.Subscribers(); n != 1 {
		t.Fatalf("Subscribers() = %d", n)
	}
	if err := c.Close(); err != nil { // DELETE ends the MCP session
		t.Fatal(err)
	}
	if n := st.srv.Subscribers(); n != 0 {
		t.Fatalf("Subscribers() = %d after the client closed", n)
	}
}
