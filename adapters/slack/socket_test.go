package slack

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestSocketMode runs the adapter against a small Socket Mode server: an
// envelope is acknowledged only after its command was handled; Slack's
// "disconnect" makes the client connect again; the envelope redelivered
// on the new connection is acknowledged without being handled twice.
func TestSocketMode(t *testing.T) {
	api := newFakeAPI(t)
	conns := make(chan *websocket.Conn, 4)
	// slack-go dials with Origin https://api.slack.com.
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	api.ws = func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		_ = c.WriteJSON(map[string]any{"type": "hello", "num_connections": 1})
		conns <- c
	}
	wsURL := "ws" + strings.TrimPrefix(strings.TrimSuffix(api.URL, "api/"), "http") + "ws"
	api.on("apps.connections.open", func(url.Values) answer { return okAnswer(map[string]any{"url": wsURL}) })
	h := newRecorder("U1")
	a := newTestAdapter(t, api, func(o *Options) { o.PingInterval = time.Minute }, withAuthorizer(h))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()

	next := func() *websocket.Conn {
		select {
		case c := <-conns:
			t.Cleanup(func() { c.Close() })
			return c
		case <-time.After(10 * time.Second):
			t.Fatal("no connection")
			return nil
		}
	}
	envelope := func(id string, retry int) map[string]any {
		return map[string]any{"envelope_id": id, "type": "events_api", "retry_attempt": retry, "accepts_response_payload": false,
			"payload": json.RawMessage(`{"type":"event_callback","team_id":"T1","event_id":"Ev1","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"900.1","thread_ts":"100.1"}}`)}
	}
	readAck := func(c *websocket.Conn) string {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var ack struct {
			EnvelopeID string `json:"envelope_id"`
		}
		if err := c.ReadJSON(&ack); err != nil {
			t.Fatalf("no acknowledgement: %v", err)
		}
		return ack.EnvelopeID
	}

	c1 := next()
	if err := c1.WriteJSON(envelope("E1", 0)); err != nil {
		t.Fatal(err)
	}
	if id := readAck(c1); id != "E1" || len(h.commands()) != 1 {
		t.Fatalf("acknowledged %q after %d commands, want E1 after 1", id, len(h.commands()))
	}
	if err := c1.WriteJSON(map[string]any{"type": "disconnect", "reason": "refresh_requested"}); err != nil {
		t.Fatal(err)
	}
	c2 := next()
	if err := c2.WriteJSON(envelope("E2", 1)); err != nil {
		t.Fatal(err)
	}
	if id := readAck(c2); id != "E2" || len(h.commands()) != 1 {
		t.Errorf("acknowledged %q after %d commands, want E2 after still 1", id, len(h.commands()))
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return")
	}
}
