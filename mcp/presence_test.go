package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

func (c *conn) readStatus(tb testing.TB) statusBody {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	res, err := c.ReadResource(ctx, mcp.ReadResourceRequest{Params: mcp.ReadResourceParams{URI: AgentStatusURI}})
	if err != nil {
		tb.Fatal(err)
	}
	var body statusBody
	if err := json.Unmarshal([]byte(res.Contents[0].(mcp.TextResourceContents).Text), &body); err != nil {
		tb.Fatal(err)
	}
	return body
}

// nextNotice returns the next notice event on sub.
func nextNotice(tb testing.TB, sub *core.Subscription) core.Event {
	tb.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case e := <-sub.C:
			if e.Kind == core.EventNotice {
				return e
			}
		case <-deadline:
			tb.Fatal("no notice")
		}
	}
}

// ui://agent/status follows the subscriptions, of both protocol
// generations, to one session's inbox and to all sessions'; a person who
// writes to a session nobody listens to gets the no-agent notice, and
// nobody else does.
func TestAgentPresence(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	st.srv.opts.NoAgentNotice = DefaultNoAgentNotice
	st.srv.opts.NoAgentNoticeSkip = []core.Origin{"web"}
	a, b := st.createSession("a"), st.createSession("b")
	events, cancel := st.bus.Subscribe(256, false)
	defer cancel()
	write := func(id core.SessionID, origin core.Origin, text string) {
		t.Helper()
		if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id, Origin: origin, Text: text}); err != nil {
			t.Fatal(err)
		}
	}

	reader := mustDial(t, st.url, connOptions{})
	if s := reader.readStatus(t); !s.Ready || s.AllSessions != 0 || len(s.Sessions) != 0 || s.Agents != 1 {
		t.Fatalf("status with nobody listening: %+v", s)
	}
	write(a, "telegram", "anyone there?")
	n := nextNotice(t, events)
	if n.Session != a || n.Origin != "telegram" || !n.SourceOnly || n.Message == nil || n.Message.Content != DefaultNoAgentNotice ||
		(n.Lifetime != "" && n.Lifetime != core.LifetimeNextNotice) {
		t.Fatalf("no-agent notice %+v", n)
	}

	moved := st.srv.PresenceChanged()
	agent := mustDial(t, st.url, connOptions{})
	agent.subscribe(t, SessionInboxURI(a))
	select {
	case <-moved:
	case <-time.After(waitFor):
		t.Fatal("presence did not change on a subscription")
	}
	s := reader.readStatus(t)
	if s.AllSessions != 0 || len(s.Sessions) != 1 || s.Sessions[0] != (sessionListeners{SessionID: a, Listeners: 1, Listening: true}) {
		t.Fatalf("status with an agent on a: %+v", s)
	}
	// a is listened to now: no notice for it; b still gets one, after
	// whatever a's message would have caused. The web page shows
	// presence itself and gets none.
	write(a, "telegram", "now?")
	write(b, "web", "from the page")
	write(b, "telegram", "and b?")
	if n := nextNotice(t, events); n.Session != b || n.Origin != "telegram" {
		t.Fatalf("notice %+v, want one for b on telegram only", n)
	}

	all := mustDial(t, st.url, connOptions{modern: true})
	all.subscribe(t, InboxURI)
	if s := reader.readStatus(t); s.AllSessions != 1 {
		t.Fatalf("status with an agent on all sessions: %+v", s)
	}
	bound := mustDial(t, st.url, connOptions{query: "session=" + string(b)})
	if s := bound.readStatus(t); s.Session == nil || s.Session.SessionID != b || !s.Session.Listening {
		t.Fatalf("bound connection's session: %+v", s.Session)
	}
	write(b, "telegram", "heard now")
	write(b, "web", "marker")
	if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.Notice, Session: b, Origin: "telegram", Text: "marker"}); err != nil {
		t.Fatal(err)
	}
	if n := nextNotice(t, events); !strings.Contains(n.Message.Content, "marker") {
		t.Fatalf("a notice although an agent listens to all sessions: %+v", n)
	}
}

// chat_read_since with author reads only that author's messages; last_id
// is the last message read, so the next call skips what was filtered out.
func TestReadSinceAuthor(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("")
	for _, cmd := range []core.Command{
		{Kind: core.SendMessage, Text: "one"},
		{Kind: core.AssistantPost, Text: "reply"},
		{Kind: core.SendMessage, Text: "two"},
		{Kind: core.AssistantPost, Text: "reply two"},
	} {
		cmd.Session, cmd.Origin = id, core.OriginAPI
		if _, err := st.svc.Handle(context.Background(), cmd); err != nil {
			t.Fatal(err)
		}
	}
	c := mustDial(t, st.url, connOptions{})
	var all, people, first, rest InboxPage
	c.ok(t, "chat_read_since", map[string]any{"session_id": string(id)}, &all)
	c.ok(t, "chat_read_since", map[string]any{"session_id": string(id), "author": "user"}, &people)
	if got := strings.Join(contents(all.Messages), ","); got != "one,reply,two,reply two" {
		t.Fatalf("default reads every message: %s", got)
	}
	if got := strings.Join(contents(people.Messages), ","); got != "one,two" || people.LastID != all.LastID {
		t.Fatalf("author user: %s, last_id %s (all: %s)", got, people.LastID, all.LastID)
	}
	c.ok(t, "chat_read_since", map[string]any{"session_id": string(id), "author": "assistant", "limit": 1}, &first)
	c.ok(t, "chat_read_since", map[string]any{"session_id": string(id), "author": "assistant", "after_id": string(first.LastID)}, &rest)
	if contents(first.Messages)[0] != "reply" || first.LastID != first.Messages[0].ID || strings.Join(contents(rest.Messages), ",") != "reply two" {
		t.Fatalf("paged by author: %+v then %+v", first, rest)
	}
	c.fails(t, "chat_read_since", map[string]any{"author": "people"}, `author "people" is not one of user, assistant, system`)
}
