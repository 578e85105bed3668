package slack

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// TestEventsHandlerStopping: a request whose handling has not finished
// when Run stops is answered 503 at once (not acknowledged, so Slack sends
// it again) rather than holding the listener's shutdown until Slack gives
// up.
func TestEventsHandlerStopping(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, func(o *Options) { o.Events, o.SigningSecret = true, secret }, withAuthorizer(h))
	a.startWait = 0 // answered at once while Run is not running
	entered, release := make(chan struct{}), make(chan struct{})
	h.answer = func(cmd core.Command) (core.Result, error) {
		close(entered)
		<-release
		return core.Result{Session: "S1"}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, h) }()
	waitFor(t, a.recv.running)

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

// running reports whether Run lets requests in.
func (r *receiver) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.h != nil
}

// pauseLog is a slog.Handler that holds the goroutine logging msg until
// release is closed, after telling paused: a test's way to stop a request
// at a known point of EventsHandler.
type pauseLog struct {
	msg             string
	paused, release chan struct{}
}

func (p *pauseLog) Enabled(context.Context, slog.Level) bool { return true }
func (p *pauseLog) WithAttrs([]slog.Attr) slog.Handler       { return p }
func (p *pauseLog) WithGroup(string) slog.Handler            { return p }
func (p *pauseLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == p.msg {
		close(p.paused)
		<-p.release
	}
	return nil
}

// TestEventsHandlerLateRequest: a request that was being read while Run
// stopped is answered 503 and never reaches the Handler or a lane, even
// though Run was running when it arrived. Before the receiver, such a
// request queued its envelope after Run had waited for its lanes: the
// Handler ran after Run returned and the lanes' WaitGroup got an Add
// racing Run's Wait (the race detector's report in a full -race run).
// The request is held at the debug log of its retry number, the last
// thing EventsHandler does before it queues the envelope.
func TestEventsHandlerLateRequest(t *testing.T) {
	hold := &pauseLog{msg: "Slack retried a request", paused: make(chan struct{}), release: make(chan struct{})}
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, func(o *Options) {
		o.Events, o.SigningSecret, o.Logger = true, secret, slog.New(hold)
	}, withAuthorizer(h))
	a.startWait = 0 // answered at once while Run is not running
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, h) }()
	waitFor(t, a.recv.running)

	event := `{"type":"event_callback","team_id":"T1","event_id":"Ev9","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"900.1","thread_ts":"100.1"}}`
	r := signed(event, "application/json", time.Now(), secret)
	r.Header.Set("X-Slack-Retry-Num", "1")
	answered := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		a.EventsHandler().ServeHTTP(w, r)
		answered <- w.Code
	}()
	select {
	case <-hold.paused:
	case <-time.After(5 * time.Second):
		t.Fatal("the request did not reach its retry log")
	}
	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
	close(hold.release)
	select {
	case code := <-answered:
		if code != http.StatusServiceUnavailable {
			t.Errorf("answered %d after Run returned, want 503", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not answered")
	}
	a.lanes.wait()
	if cmds := h.commands(); len(cmds) != 0 {
		t.Errorf("the Handler got %d commands after Run returned", len(cmds))
	}
}

// TestEventsHandlerAcrossRuns: requests keep coming while Run starts,
// stops and starts again (as it does when the daemon restarts a failed
// adapter); each is answered 200 only once its command was handled, or
// 503, and none reaches the Handler while no Run runs. Under -race this
// also checks that requests and Run's shutdown share no state unguarded.
func TestEventsHandlerAcrossRuns(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, func(o *Options) { o.Events, o.SigningSecret = true, secret }, withAuthorizer(h))
	a.startWait = 0 // answered at once while Run is not running
	var running atomic.Bool
	var late atomic.Int32
	h.answer = func(core.Command) (core.Result, error) {
		if !running.Load() {
			late.Add(1)
		}
		return core.Result{Session: "S1"}, nil
	}
	srv := a.EventsHandler()
	const rounds, senders, each = 20, 4, 10
	var acked sync.Map // ts of the events answered 200
	for round := range rounds {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		running.Store(true)
		ran := make(chan error, 1)
		go func() { ran <- a.Run(ctx, h) }()
		var wg sync.WaitGroup
		for s := range senders {
			wg.Go(func() {
				for i := range each {
					if s == 0 && i == each/2 {
						cancel() // Run stops while the others send
					}
					ts := fmt.Sprintf("%d.%d%02d", 1000+round, s, i)
					event := fmt.Sprintf(`{"type":"event_callback","team_id":"T1","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":%q,"thread_ts":"100.%d"}}`, ts, s)
					w := httptest.NewRecorder()
					srv.ServeHTTP(w, signed(event, "application/json", time.Now(), secret))
					switch w.Code {
					case http.StatusOK:
						acked.Store("C1:"+ts, true)
					case http.StatusServiceUnavailable:
					default:
						t.Errorf("event %s answered %d", ts, w.Code)
					}
				}
			})
		}
		wg.Wait()
		if err := <-ran; err != nil {
			t.Fatalf("Run: %v", err)
		}
		running.Store(false)
	}
	if n := late.Load(); n > 0 {
		t.Errorf("%d commands reached the Handler after Run returned", n)
	}
	handled := map[string]bool{}
	for _, c := range h.commands() {
		handled[c.PlatformID] = true
	}
	acked.Range(func(k, _ any) bool {
		if !handled[k.(string)] {
			t.Errorf("event %s answered 200 but never handled", k)
		}
		return true
	})
}

// TestEventsHandlerRequestEnds: a request whose envelope is still being
// handled when the request ends — Slack stopped waiting, or the listener
// is shutting down and cancelled it — is answered 503, not the 200 that
// net/http sends for a handler returning without an answer: the envelope
// is not durable yet, so it must not be acknowledged.
func TestEventsHandlerRequestEnds(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, func(o *Options) { o.Events, o.SigningSecret = true, secret }, withAuthorizer(h))
	a.startWait = 0 // answered at once while Run is not running
	entered, release := make(chan struct{}), make(chan struct{})
	h.answer = func(cmd core.Command) (core.Result, error) {
		close(entered)
		<-release
		return core.Result{Session: "S1"}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- a.Run(ctx, h) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	defer close(release)
	waitFor(t, a.recv.running)

	event := `{"type":"event_callback","team_id":"T1","event_id":"Ev9","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"900.1","thread_ts":"100.1"}}`
	reqCtx, end := context.WithCancel(context.Background())
	answered := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		a.EventsHandler().ServeHTTP(w, signed(event, "application/json", time.Now(), secret).WithContext(reqCtx))
		answered <- w.Code
	}()
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the event was not handled")
	}
	end()
	select {
	case code := <-answered:
		if code != http.StatusServiceUnavailable {
			t.Errorf("answered %d when the request ended unhandled, want 503", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the request was not answered when it ended")
	}
}
