package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

var (
	ann      = telegramtest.User{ID: 42, FirstName: "Ann"}
	stranger = telegramtest.User{ID: 666, FirstName: "Mallory"}
)

// tgStack is parley serve, wired from configuration, against a fake Bot
// API server with Telegram's limits on, plus an MCP agent.
type tgStack struct {
	t     *testing.T
	srv   *telegramtest.Server
	forum int64
	cfg   config.Config
	m     *Main
	stop  func()
	agent *agent
	// logger, when set before start, receives the daemon's log.
	logger *slog.Logger
	// noAgent, when set before start, connects no test agent: parley runs
	// its own ([agent] kind).
	noAgent bool
}

func newTGStack(t *testing.T, rich bool) *tgStack {
	t.Helper()
	return newTGStackWith(t, telegramtest.Options{RichMessages: rich, Limits: true})
}

func newTGStackWith(t *testing.T, opts telegramtest.Options) *tgStack {
	t.Helper()
	st := newTGStackStopped(t, opts)
	st.start()
	return st
}

// newTGStackStopped is newTGStackWith before start: the test changes the
// configuration first.
func newTGStackStopped(t *testing.T, opts telegramtest.Options) *tgStack {
	t.Helper()
	srv := telegramtest.NewServer(t, opts)
	st := &tgStack{t: t, srv: srv, forum: srv.NewForum("Team")}
	st.cfg = config.Default()
	st.cfg.DataDir = t.TempDir()
	st.cfg.HTTP.Listen = "127.0.0.1:0"
	telegramConfig(&st.cfg).Token, telegramConfig(&st.cfg).APIURL = srv.Token, srv.URL
	telegramConfig(&st.cfg).ChatID, telegramConfig(&st.cfg).AllowedUsers = st.forum, []int64{ann.ID}
	return st
}

func (st *tgStack) start() {
	st.t.Helper()
	st.m = &Main{Config: st.cfg, Logger: st.logger}
	if err := st.m.Open(context.Background()); err != nil {
		st.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.m.Run(ctx) }()
	stopped := false
	st.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			st.t.Errorf("run: %v", err)
		}
		if err := st.m.Close(); err != nil {
			st.t.Errorf("close: %v", err)
		}
	}
	st.t.Cleanup(finalStop(st.m, st.stop))
	awaitStarted(st.t, st.m)
	if st.noAgent {
		return
	}
	st.agent = connectAgent(st.t, st.m.Addr())
	sub, done2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer done2()
	if err := st.agent.Subscribe(sub, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
		st.t.Fatal(err)
	}
}

func (st *tgStack) restart() {
	st.t.Helper()
	st.stop()
	st.start()
}

func (st *tgStack) await(what string, cond func() bool) {
	st.t.Helper()
	st.srv.Await(st.t, 60*time.Second, what, cond)
}

// newTopic has Ann start a session with /new and returns its topic.
func (st *tgStack) newTopic(title string) int {
	st.t.Helper()
	before := len(st.srv.Topics(st.forum))
	st.srv.SendText(st.forum, 0, ann, "/new "+title)
	st.await("the session's topic", func() bool { return len(st.srv.Topics(st.forum)) > before })
	topics := st.srv.Topics(st.forum)
	return topics[len(topics)-1].ID
}

// heard waits for the agent's notification and reads the new messages.
func (st *tgStack) heard(after string) readResult {
	st.t.Helper()
	select {
	case <-st.agent.notes:
	case <-time.After(30 * time.Second):
		st.t.Fatal("the agent was not notified")
	}
	var r readResult
	st.agent.call(st.t, "chat_read_since", map[string]any{"after_id": after}, &r)
	return r
}

func botMessages(msgs []telegramtest.Message) []telegramtest.Message {
	var out []telegramtest.Message
	for _, m := range msgs {
		if m.FromBot {
			out = append(out, m)
		}
	}
	return out
}

func longAnswer(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "Step %d: checked the retry loop and the clock, nothing odd.\n", i)
		if i%20 == 19 {
			b.WriteString("\n```go\nfor attempt := range 3 {\n\tif err := try(); err == nil {\n\t\tbreak\n\t}\n}\n```\n\n")
		}
	}
	return b.String()
}

// TestTelegramPersonAndAgent is issue 4's end-to-end story: a person writes
// in a topic, the agent is notified over MCP, streams 10,000 characters and
// posts a message; the topic shows one output message with the final text,
// the assistant message, exactly one notification, and the person's earlier
// input is deleted when they write again.
func TestTelegramPersonAndAgent(t *testing.T) {
	for _, rich := range []bool{true, false} {
		t.Run(fmt.Sprintf("rich=%v", rich), func(t *testing.T) {
			st := newTGStack(t, rich)
			topic := st.newTopic("Flaky test")
			st.srv.SendText(st.forum, topic, stranger, "let me in") // ignored silently
			question := st.srv.SendText(st.forum, topic, ann, "Why does TestRetry flake?")
			r := st.heard("")
			if len(r.Messages) != 1 || r.Messages[0].Content != "Why does TestRetry flake?" {
				t.Fatalf("agent read %+v (the stranger's message must not be there)", r.Messages)
			}
			session := r.Messages[0].SessionID

			final := longAnswer(10000)
			for i := 1; i <= 20; i++ {
				st.agent.call(t, "session.output", map[string]any{"session_id": session, "content": final[:len(final)*i/20]}, nil)
			}
			st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "Found it: the retry loop reads the **wall clock**."}, nil)
			st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)

			var shown []telegramtest.Message
			st.await("the final output and the answer", func() bool {
				shown = botMessages(st.srv.Messages(st.forum, topic))
				var text strings.Builder
				for _, m := range shown {
					text.WriteString(m.Text)
				}
				return strings.Contains(text.String(), "wall clock") && strings.Contains(text.String(), "Step 150:")
			})
			notifying := 0
			for _, m := range shown {
				if !m.Silent {
					notifying++
				}
			}
			if notifying != 1 {
				t.Errorf("%d notifying messages, want exactly one for the turn", notifying)
			}
			if rich {
				// One output message carries the whole final text.
				var outputs int
				for _, m := range shown {
					if m.Markdown == final {
						outputs++
					}
				}
				if outputs != 1 {
					t.Errorf("want one output message with the whole final text, got %d", outputs)
				}
			} else {
				for _, m := range shown {
					if n := len([]rune(m.Text)); n > 4096 {
						t.Errorf("a message of %d characters", n)
					}
				}
			}
			if st.srv.RateLimited() > 0 {
				t.Errorf("%d calls were refused with 429: the outbox overran Telegram's limits", st.srv.RateLimited())
			}

			st.srv.SendText(st.forum, topic, ann, "Thanks!")
			st.await("the earlier question deleted", func() bool {
				m, _ := st.srv.Message(st.forum, question)
				return m.Deleted
			})
		})
	}
}
