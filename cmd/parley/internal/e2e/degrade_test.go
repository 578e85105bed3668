package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// TestTelegramDownAtStartDegrades: with the Bot API down when parley
// starts, parley serves anyway: the page and the API answer, /api/health
// says Telegram is unreachable and when it is tried again, and an answer
// posted meanwhile waits. When the Bot API is back, Telegram is started,
// the waiting answer is delivered, and a message from Telegram reaches the
// session and its answer goes back.
func TestTelegramDownAtStartDegrades(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	srv.InjectFaults(telegramtest.Faults{Exempt: []string{}}) // getMe and getUpdates fail too
	srv.SetOutage(true)
	st := newTGStackOn(t, srv)
	st.start()
	addr := st.m.Addr()

	err := servetest.WaitDown(t, st.m, "telegram", core.PlatformUnreachable)
	if !strings.Contains(err.Error(), "cannot reach the Bot API") || core.FixOf(err) == "" {
		t.Errorf("error %v, fix %q", err, core.FixOf(err))
	}
	// Metrics say so too.
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `parley_platform_up{adapter="telegram"} 0`) {
		t.Errorf("/metrics lacks telegram down")
	}
	// The page and the API answer.
	resp, err = http.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the page: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, err = http.Post("http://"+addr+"/api/chat", "application/json", strings.NewReader(`{"text":"from the page"}`))
	if err != nil {
		t.Fatal(err)
	}
	var posted struct {
		Session string `json:"session_id"`
	}
	json.NewDecoder(resp.Body).Decode(&posted)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || posted.Session == "" {
		t.Fatalf("POST /api/chat: %d %+v", resp.StatusCode, posted)
	}
	// MCP serves: the agent answers the page's session.
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": posted.Session, "content": "answered while Telegram was down"}, nil)
	for _, c := range srv.Calls() {
		if c.Method == "sendMessage" || c.Method == "createForumTopic" {
			t.Fatalf("a down Bot API was sent %s", c.Method)
		}
	}

	srv.SetOutage(false)
	servetest.WaitHealth(t, addr, "telegram up", func(h servetest.Health) bool { return h.Platforms["telegram"].Up })
	if err := st.m.Daemon().PlatformError("telegram"); err != nil {
		t.Errorf("up, with error %v", err)
	}
	// What waited is delivered: the page's session gets its topic, with
	// the answer.
	st.await("the answer posted while Telegram was down", func() bool {
		for _, tp := range srv.Topics(st.forum) {
			if len(shown(srv, st.forum, tp.ID, "answered while Telegram was down")) == 1 {
				return true
			}
		}
		return false
	})
	// Telegram's input reaches a session, and the answer goes back.
	topic := st.newTopic("work")
	session, _ := st.ask(topic, "hello from Telegram", "")
	st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "hello from the agent"}, nil)
	st.showing(topic, "hello from the agent")
}
