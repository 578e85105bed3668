package e2e

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// Two parley serve on one PostgreSQL, Telegram on the first only (so that
// no poller lease is needed) and the MCP agent connected to the second: a
// person's Telegram message reaches the agent, through the first
// instance's commit and the second's follower; both instances see
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
	listening := func(m *serve.Main) bool { return m.Presence().AgentStatus().All == 1 }
	servetest.PollUntil(t, 10*time.Second, "the first instance hearing of the agent at the second", func() bool {
		return listening(tg.m) && listening(other.m)
	}, nil)

	topic := tg.newTopic("work")
	sent := time.Now()
	tg.srv.SendText(tg.forum, topic, ann, "hello from Telegram")
	r := other.heard("")
	// How soon is logged, not asserted: that a notification, not the
	// follower's poll, brings it is TestNotifyAcrossInstances's (store/
	// postgres), with a poll of an hour; a bound on time here would only
	// measure the machine.
	t.Logf("a Telegram message through one instance reached the agent at the other in %v", time.Since(sent))
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
	servetest.PollUntil(t, 30*time.Second, "an empty journal", func() bool {
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

// Two parley serve on one PostgreSQL, both with Telegram (one polls, by
// its lease) and both running Claude Code ([agent] kind = "claude-code",
// the real CLI against a fake model API, one home directory for both):
// a person's message is answered once, by the one instance holding the
// session's agent lease. That instance stops; the other takes the session
// over, and the next message is answered once, in the same conversation.
func TestPostgresAgentLease(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t)
	cli := claudetest.CLI(t)
	api := claudetest.NewAPI(t)
	env := claudetest.Env(t, api.URL)
	srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: true})
	forum := srv.NewForum("Team")
	workdir := t.TempDir()
	var stacks []*tgStack
	for range 2 {
		st := &tgStack{stack: newStack(t), srv: srv, forum: forum}
		telegramSection(&st.cfg, srv, forum)
		st.cfg.Store.URL = db.URL
		st.cfg.Agent = config.Agent{Kind: config.AgentClaudeCode, Command: cli, Workdir: workdir,
			Permissions: config.PermissionsAsk, MaxRunning: 4, Env: env}
		st.noAgent = true
		st.captureLog(slog.LevelInfo)
		st.start()
		stacks = append(stacks, st)
	}
	first := stacks[0]
	topic := first.newTopic("work")
	// holder returns the stack whose instance holds the session's agent
	// lease, failing unless exactly one does.
	holder := func() *tgStack {
		t.Helper()
		var out []*tgStack
		for _, st := range stacks {
			if st.stop == nil {
				continue
			}
			leases, err := st.m.Daemon().Leases(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for name, mine := range leases {
				if mine && strings.HasPrefix(name, "session/") {
					out = append(out, st)
				}
			}
		}
		if len(out) != 1 {
			t.Fatalf("%d instances hold a session's agent lease, want one", len(out))
		}
		return out[0]
	}
	// answeredOnce waits for text in the topic and for the turn's end
	// (the agent's watermark is saved before it yields), and checks that
	// text is shown once.
	answeredOnce := func(text string) {
		t.Helper()
		first.await("the answer "+text, func() bool { return len(shownIn(srv, forum, topic, text)) > 0 })
		running := stacks[0]
		if running.stop == nil {
			running = stacks[1]
		}
		servetest.PollUntil(t, 30*time.Second, "the turn's end", func() bool {
			ss, err := running.m.Daemon().Store.Sessions(context.Background())
			return err == nil && len(ss) == 1 && ss[0].Status == core.StatusIdle
		}, nil)
		if n := len(shownIn(srv, forum, topic, text)); n != 1 {
			t.Fatalf("%q is shown in %d messages, want one", text, n)
		}
	}

	api.Say(claudetest.Text("The answer is 42."))
	srv.SendText(forum, topic, ann, "What is the answer?")
	answeredOnce("The answer is 42.")
	if n := len(api.ModelRequests()); n != 1 {
		t.Errorf("the model was asked %d times, want once: by one agent", n)
	}
	h := holder()

	// The holder stops cleanly (its agent with it, the lease released).
	h.stop()
	h.stop = nil
	api.Say(claudetest.Text("You asked for the answer."))
	srv.SendText(forum, topic, ann, "What did I ask?")
	answeredOnce("You asked for the answer.")
	if holder() == h {
		t.Fatal("the stopped instance still holds the session")
	}
	reqs := api.ModelRequests()
	last := strings.Join(reqs[len(reqs)-1].Texts("user"), "\n") + strings.Join(reqs[len(reqs)-1].Texts("assistant"), "\n")
	for _, want := range []string{"What is the answer?", "The answer is 42.", "What did I ask?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the turn taken over does not carry %q: the conversation did not continue:\n%s", want, last)
		}
	}
	if n := len(shownIn(srv, forum, topic, "The answer is 42.")); n != 1 {
		t.Errorf("the first answer is shown %d times after the takeover", n)
	}
}

// shownIn is every bot message of the topic that contains text.
func shownIn(srv *telegramtest.Server, forum int64, topic int, text string) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range botMessages(srv.Messages(forum, topic)) {
		if strings.Contains(m.Text, text) {
			out = append(out, m)
		}
	}
	return out
}
