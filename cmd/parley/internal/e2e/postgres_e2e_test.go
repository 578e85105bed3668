package e2e

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/store/postgres"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// parley serve with [store] url on a real PostgreSQL, against the fake
// Telegram: a person's message reaches the MCP agent and the answer
// reaches the topic; across a restart no message is lost or repeated, in
// the inbox or in the topic, and the data directory holds no bbolt file.
func TestTelegramOnPostgres(t *testing.T) {
	t.Parallel()
	db := pgtest.Start(t)
	st := newTGStackStopped(t, telegramtest.Options{})
	st.cfg.Store.URL = db.URL
	st.start()
	if _, ok := st.m.Daemon().Store.(*postgres.Store); !ok {
		t.Fatalf("the daemon runs on %T, not PostgreSQL", st.m.Daemon().Store)
	}

	topic, session, last := st.session("one")
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "answer one"}, nil)
	st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)
	st.showing(topic, "answer one")
	st.srv.SendText(st.forum, topic, ann, "two")
	if got := contents(st.heard(last)); got != "answer one|two" {
		t.Fatalf("agent read %q, want answer one|two", got)
	}
	st.idle()

	st.restart()
	st.srv.SendText(st.forum, topic, ann, "three")
	// The agent's watermark from before the restart still works.
	if got := contents(st.heard(last)); got != "answer one|two|three" {
		t.Errorf("after the restart the agent read %q after its watermark, want answer one|two|three", got)
	}
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "answer three"}, nil)
	st.showing(topic, "answer three")
	st.idle()

	var got []string
	for _, m := range st.inbox() {
		got = append(got, m.Content)
	}
	if strings.Join(got, "|") != "one|answer one|two|three|answer three" {
		t.Errorf("inbox %q, want each message exactly once", got)
	}
	answers := map[string]int{}
	for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
		for _, a := range []string{"answer one", "answer three"} {
			if strings.Contains(m.Text, a) {
				answers[a]++
			}
		}
	}
	if answers["answer one"] != 1 || answers["answer three"] != 1 {
		t.Errorf("the topic shows the answers %v times, want each once", answers)
	}
	if _, err := os.Stat(filepath.Join(st.cfg.DataDir, daemon.DBFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a bbolt file in the data directory while on PostgreSQL: %v", err)
	}
}

// contents is the texts r read, in order, joined by "|".
func contents(r readResult) string {
	var got []string
	for _, m := range r.Messages {
		got = append(got, m.Content)
	}
	return strings.Join(got, "|")
}
