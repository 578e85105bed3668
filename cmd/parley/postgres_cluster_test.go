package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// Two parley serve on one PostgreSQL, Telegram on the first only (so that
// no poller lease is needed) and the MCP agent connected to the second: a
// person's Telegram message reaches the agent within a second, through the
// first instance's commit and the second's follower; both instances see
// the same presence, so the first sends no "no agent is connected" notice
// for an agent connected to the other. The agent's answer, posted through
// the second, which runs no Telegram, is handed over to the first and
// reaches the topic exactly once.
func TestPostgresTwoInstances(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t)
	tg := newTGStackStopped(t, telegramtest.Options{})
	tg.cfg.Store.URL = db.URL
	tg.noAgent = true
	tg.start()
	other := newStack(t)
	other.cfg.Store.URL = db.URL
	other.start()
	if a, b := tg.m.Daemon().Instance, other.m.Daemon().Instance; a == b || a == "" {
		t.Fatalf("instance ids %q and %q", a, b)
	}

	// The agent's subscription, announced by the second instance, is
	// heard by the first.
	listening := func(m *Main) bool { return m.Presence().AgentStatus().All == 1 }
	pollUntil(t, 10*time.Second, "the first instance hearing of the agent at the second", func() bool {
		return listening(tg.m) && listening(other.m)
	}, nil)

	topic := tg.newTopic("work")
	sent := time.Now()
	tg.srv.SendText(tg.forum, topic, ann, "hello from Telegram")
	r := other.heard("")
	lag := time.Since(sent)
	t.Logf("a Telegram message through one instance reached the agent at the other in %v", lag)
	if lag > time.Second {
		t.Errorf("the agent at the other instance heard of the message after %v, want within a second", lag)
	}
	if len(r.Messages) != 1 || r.Messages[0].Content != "hello from Telegram" {
		t.Fatalf("the agent read %+v", r.Messages)
	}
	session := r.Messages[0].SessionID

	// A second message: the first instance has sent whatever it was
	// going to for the first by the time this one is heard.
	tg.srv.SendText(tg.forum, topic, ann, "are you there?")
	if r := other.heard(r.LastID); len(r.Messages) != 1 || r.Messages[0].Content != "are you there?" {
		t.Fatalf("the agent read %+v after its watermark", r.Messages)
	}
	tg.idle()
	for _, m := range botMessages(tg.srv.Messages(tg.forum, topic)) {
		if strings.Contains(m.Text, mcp.DefaultNoAgentNotice) {
			t.Errorf("the topic shows the no-agent notice though an agent listens at the other instance: %q", m.Text)
		}
	}

	// The answer is committed by the instance without Telegram: it hands
	// it over, and the first shows it once. Once the journal is empty
	// nothing more is sent.
	posted := time.Now()
	other.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "answered from the other instance"}, nil)
	answers := func() int {
		n := 0
		for _, m := range botMessages(tg.srv.Messages(tg.forum, topic)) {
			if strings.Contains(m.Text, "answered from the other instance") {
				n++
			}
		}
		return n
	}
	tg.await("the answer in the topic", func() bool { return answers() > 0 })
	t.Logf("the answer posted through the instance without Telegram reached the topic in %v", time.Since(posted))
	pollUntil(t, 30*time.Second, "an empty journal", func() bool {
		ds, err := tg.m.Daemon().Store.Deliveries(context.Background(), 0, 0)
		return err == nil && len(ds) == 0
	}, nil)
	if n := answers(); n != 1 {
		t.Errorf("the answer is in the topic %d times, want once", n)
	}

	// Presence is the same from both.
	a, b := tg.m.Presence().AgentStatus(), other.m.Presence().AgentStatus()
	if a.Ready != b.Ready || a.All != b.All || !a.Listening(core.SessionID(session)) || !b.Listening(core.SessionID(session)) {
		t.Errorf("presence differs: first instance %+v, second %+v", a, b)
	}
}
