package e2e

import (
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// TestTelegramQueuedAnswersSurviveKill: the agent posts more assistant
// messages than the group's budget (20 a minute, spent in a burst at one a
// second per topic) lets out; once the budget is spent, and nothing can be
// in flight, the daemon is killed (crash: as SIGKILL, on the fake clock)
// while the rest are queued. After a restart on what it left on disk each
// arrives exactly once.
func TestTelegramQueuedAnswersSurviveKill(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st := newTGBubbleStackStopped(t, telegramtest.Options{RichMessages: true, Limits: true})
		st.captureLog(slog.LevelInfo)
		st.start()
		srv, forum := st.srv, st.forum
		topic, session, _ := st.session("tell me everything")

		const n = 24
		answer := func(k int) string { return fmt.Sprintf("Queued answer %d of %d", k, n) }
		for k := 1; k <= n; k++ {
			st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": answer(k)}, nil)
		}
		delivered := func() int {
			c := 0
			for k := 1; k <= n; k++ {
				c += len(shown(srv, forum, topic, answer(k)))
			}
			return c
		}
		// The budget is spent when nothing new shows for 2.5 s (while it
		// lasts, the topic gets one a second); the next send is then most of
		// a minute away, so the kill cannot fall between Telegram's answer
		// and its confirmation (a window in which a platform without
		// idempotency keys cannot avoid a duplicate).
		last, since := -1, time.Now()
		servetest.PollUntil(t, 2*time.Minute, "the group's budget to be spent", func() bool {
			if c := delivered(); c != last {
				last, since = c, time.Now()
			}
			return last > 0 && time.Since(since) > 2500*time.Millisecond
		}, nil)
		st.crash()
		before := delivered()
		if n-before < 3 {
			t.Fatalf("only %d of %d answers were still queued at the kill: the test needs the group's pacing to hold them back", n-before, n)
		}
		t.Logf("killed with %d of %d answers delivered", before, n)

		st.start()
		all := func() bool {
			for k := 1; k <= n; k++ {
				if len(shown(srv, forum, topic, answer(k))) == 0 {
					return false
				}
			}
			return true
		}
		// The restarted daemon's outbox idle for a while with answers missing
		// means nothing will bring them: stop waiting.
		var idleSince time.Time
		stuck := func() string {
			if st.metric("parley_outbox_queue_depth")+st.metric("parley_outbox_in_flight") > 0 {
				idleSince = time.Time{}
				return ""
			}
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if time.Since(idleSince) > 15*time.Second {
				return "the restarted daemon's outbox has been idle for 15 s: " + missing(srv, forum, topic, n, answer)
			}
			return ""
		}
		// A check a second: the restarted daemon waits out most of the
		// group's minute, and each check scrapes /metrics.
		servetest.PollEvery(t, time.Second, 3*time.Minute, "every answer after the restart", all, stuck)
		servetest.PollEvery(t, time.Second, 2*time.Minute, "the restarted daemon's outbox to be idle", func() bool {
			return st.metric("parley_outbox_queue_depth")+st.metric("parley_outbox_in_flight") == 0
		}, nil)
		for k := 1; k <= n; k++ {
			if got := len(shown(srv, forum, topic, answer(k))); got != 1 {
				t.Errorf("%q shown %d times, want exactly once", answer(k), got)
			}
		}
	})
}

// missing says which answers the topic does not show.
func missing(srv *telegramtest.Server, forum int64, topic, n int, answer func(int) string) string {
	var gone []int
	for k := 1; k <= n; k++ {
		if len(shown(srv, forum, topic, answer(k))) == 0 {
			gone = append(gone, k)
		}
	}
	return fmt.Sprintf("answers %v of %d never arrived", gone, n)
}
