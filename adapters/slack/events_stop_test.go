package slack

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// TestEventsHandlerStopping: a request whose handling has not finished
// when Run stops is answered 503 at once (not acknowledged, so Slack sends
// it again) rather than holding the listener's shutdown until Slack gives
// up.
func TestEventsHandlerStopping(t *testing.T) {
	a := newTestAdapter(t, nil, func(o *Options) { o.Events, o.SigningSecret = true, secret })
	h := newRecorder("U1")
	entered, release := make(chan struct{}), make(chan struct{})
	h.answer = func(cmd core.Command) (core.Result, error) {
		close(entered)
		<-release
		return core.Result{Session: "S1"}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, h) }()
	waitFor(t, func() bool { return a.handler.Load() != nil })

	event := `{"type":"event_callback","team_id":"T1","event_id":"Ev9","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"900.1","thread_ts":"100.1"}}`
	answered := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		a.EventsHandler().ServeHTTP(w, signed(event, "application/json", time.Now(), secret))
		answered <- w.Code
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the event was not handled")
	}
	cancel()
	select {
	case code := <-answered:
		if code != http.StatusServiceUnavailable {
			t.Errorf("answered %d while stopping, want 503", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not answered when Run stopped")
	}
	close(release)
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}
