package e2e

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

var (
	ann      = telegramtest.User{ID: 42, FirstName: "Ann"}
	stranger = telegramtest.User{ID: 666, FirstName: "Mallory"}
)

// tgStack is the harness's Telegram driver: parley serve against a fake
// Bot API server (telegramtest) with a forum where sessions live as topics
// and Ann is allowed in.
type tgStack struct {
	*stack
	srv   *telegramtest.Server
	forum int64
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
	return newTGStackOn(t, telegramtest.NewServer(t, opts))
}

// newTGStackOn is newTGStackStopped on a fake the test has prepared (its
// faults injected, say).
func newTGStackOn(t *testing.T, srv *telegramtest.Server) *tgStack {
	t.Helper()
	st := &tgStack{stack: newStack(t), srv: srv, forum: srv.NewForum("Team")}
	telegramSection(&st.cfg, srv, st.forum)
	return st
}

// telegramSection configures the Telegram adapter for srv: its token and
// URL, forum as the group where sessions live, and Ann allowed in.
func telegramSection(cfg *config.Config, srv *telegramtest.Server, forum int64) {
	telegramConfig(cfg).Token, telegramConfig(cfg).APIURL = srv.Token, srv.URL
	telegramConfig(cfg).ChatID, telegramConfig(cfg).AllowedUsers = forum, []int64{ann.ID}
}

// tgWait bounds each of a Telegram stack's waits; it decides no outcome.
// A real agent's turn is inside some waits: on 2 cores under make test's
// load a Claude Code turn after an approval passed a minute once, so the
// bound is longer than the Matrix tests' (mxWait).
const tgWait = 3 * time.Minute

// await waits (up to tgWait) until cond holds, re-checking whenever the
// fake's state changes.
func (st *tgStack) await(what string, cond func() bool) {
	st.t.Helper()
	st.srv.Await(st.t, tgWait, what, cond)
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
	t.Parallel()
	for _, rich := range []bool{true, false} {
		t.Run(fmt.Sprintf("rich=%v", rich), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				st := newTGBubbleStack(t, rich)
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
		})
	}
}

// newTGBubbleStack is newTGStack on a fake clock (newTGBubbleStackStopped).
func newTGBubbleStack(t *testing.T, rich bool) *tgStack {
	t.Helper()
	st := newTGBubbleStackStopped(t, telegramtest.Options{RichMessages: rich, Limits: true})
	st.start()
	return st
}

// newTGBubbleStackStopped is newTGStackStopped for a test inside
// synctest.Test: the fake Bot API, the daemon and the agent serve and call
// each other on an in-memory network (bubbleNet), so that the test waits
// out Telegram's pacing, retry_after and the outbox's backoff on the
// bubble's fake clock.
func newTGBubbleStackStopped(t *testing.T, opts telegramtest.Options) *tgStack {
	t.Helper()
	n := bubbleNet(t)
	opts.Listener = n.Host().Listen()
	st := newTGStackOn(t, telegramtest.NewServer(t, opts))
	st.net = n
	return st
}

// telegramConfig is c's [telegram] section, added with its defaults when c
// has none (config.Default).
func telegramConfig(c *config.Config) *telegram.Config {
	return c.SectionFor(telegram.Platform).(*telegram.Config)
}
