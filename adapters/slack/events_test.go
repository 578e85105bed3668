package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

const secret = "8f742231b10e8888abcd99yyyzzz85a5"

// signed is a request to the events handler as Slack signs it, at ts.
func signed(body, contentType string, ts time.Time, key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/slack/events", strings.NewReader(body))
	r.Header.Set("Content-Type", contentType)
	stamp := strconv.FormatInt(ts.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	io.WriteString(mac, "v0:"+stamp+":"+body)
	r.Header.Set("X-Slack-Request-Timestamp", stamp)
	r.Header.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return r
}

func TestVerify(t *testing.T) {
	body := `{"type":"event_callback"}`
	now := time.Now()
	tests := []struct {
		name string
		r    *http.Request
		ok   bool
	}{
		{"valid", signed(body, "application/json", now, secret), true},
		{"valid, a little skewed", signed(body, "application/json", now.Add(4*time.Minute), secret), true},
		{"bad signature", signed(body, "application/json", now, "another secret"), false},
		{"outside the replay window", signed(body, "application/json", now.Add(-6*time.Minute), secret), false},
		{"from the future", signed(body, "application/json", now.Add(6*time.Minute), secret), false},
		{"unsigned", httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := verify(tt.r.Header, []byte(body), secret)
			if (err == nil) != tt.ok {
				t.Errorf("verify: %v, want ok %v", err, tt.ok)
			}
		})
	}
	// The body is what is signed.
	r := signed(body, "application/json", now, secret)
	if err := verify(r.Header, []byte(body+" "), secret); err == nil {
		t.Error("a changed body passed")
	}
}

// TestEventsHandler: events mode answers the URL check, refuses unsigned
// requests and, while Run runs, acknowledges each envelope after its
// commands are handled, with a slash command's reply as the body.
func TestEventsHandler(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, func(o *Options) { o.Events, o.SigningSecret = true, secret }, withAuthorizer(h))
	a.startWait = 0 // answered at once while Run is not running
	srv := a.EventsHandler()
	serve := func(r *http.Request) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w
	}
	now := time.Now()
	event := `{"type":"event_callback","team_id":"T1","event_id":"Ev9","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"900.1","thread_ts":"100.1"}}`

	if w := serve(signed(`{"type":"url_verification","challenge":"abc123","token":"x"}`, "application/json", now, secret)); w.Code != 200 || w.Body.String() != "abc123" {
		t.Errorf("url_verification: %d %q", w.Code, w.Body)
	}
	if w := serve(signed(event, "application/json", now, "wrong")); w.Code != http.StatusUnauthorized {
		t.Errorf("a forged request: %d", w.Code)
	}
	if w := serve(signed(event, "application/json", now, secret)); w.Code != http.StatusServiceUnavailable {
		t.Errorf("before Run: %d, want 503 so Slack retries", w.Code)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, h) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	waitFor(t, a.recv.running)

	if w := serve(signed(event, "application/json", now, secret)); w.Code != 200 {
		t.Errorf("event: %d %s", w.Code, w.Body)
	}
	if got := shows(h.commands()); len(got) != 1 || !strings.HasPrefix(got[0], "send_message C1/100.1 id=C1:900.1") {
		t.Errorf("commands %q", got)
	}
	retry := signed(event, "application/json", now, secret)
	retry.Header.Set("X-Slack-Retry-Num", "1")
	if w := serve(retry); w.Code != 200 || len(h.commands()) != 1 {
		t.Errorf("a retried event: %d, %d commands", w.Code, len(h.commands()))
	}

	form := url.Values{"command": {"/parley"}, "text": {"help"}, "channel_id": {"C1"}, "user_id": {"U1"}, "trigger_id": {"tr"}}
	w := serve(signed(form.Encode(), "application/x-www-form-urlencoded", now, secret))
	var reply slashReply
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &reply) != nil || reply.ResponseType != "ephemeral" || !strings.Contains(reply.Text, "!cancel") {
		t.Errorf("slash command: %d %s", w.Code, w.Body)
	}

	payload := `{"type":"block_actions","user":{"id":"U1"},"container":{"type":"message","message_ts":"700.1","channel_id":"C1","thread_ts":"100.1"},
	  "channel":{"id":"C1"},"message":{"ts":"700.1","text":"Q"},"actions":[{"action_id":"parley_answer_1","block_id":"b1","value":"Q1:2","type":"button","action_ts":"1.2","text":{"type":"plain_text","text":"No"}}]}`
	if w := serve(signed(url.Values{"payload": {payload}}.Encode(), "application/x-www-form-urlencoded", now, secret)); w.Code != 200 {
		t.Errorf("click: %d", w.Code)
	}
	cmds := h.commands()
	if last := cmds[len(cmds)-1]; last.Kind != core.Answer || last.Option != 2 {
		t.Errorf("click made %s", show(last))
	}

	if w := serve(signed(`{"type":"event_callback","event":{"type":"no_such_event"}}`, "application/json", now, secret)); w.Code != 200 {
		t.Errorf("an unreadable event: %d, want 200 (skipped)", w.Code)
	}
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			t.Fatal("condition not met in time")
		case <-time.After(time.Millisecond):
		}
	}
}
