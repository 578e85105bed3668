package slack

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

func TestRoute(t *testing.T) {
	tests := []struct {
		name       string
		e          envelope
		lane, done string
	}{
		{"top-level message", envelope{event: ptr(event(t, `{"type":"message","channel":"C1","user":"U1","text":"a","ts":"100.1"}`))},
			"C1:100.1", "C1:100.1"},
		{"reply: the root's lane, the reply's key", envelope{event: ptr(event(t, `{"type":"message","channel":"C1","user":"U1","text":"a","ts":"101.0","thread_ts":"100.1"}`))},
			"C1:100.1", "C1:101.0"},
		{"file share", envelope{event: ptr(event(t, `{"type":"message","subtype":"file_share","channel":"C1","user":"U1","ts":"102.0","thread_ts":"100.1"}`))},
			"C1:100.1", "C1:102.0"},
		{"an edit: no key", envelope{event: ptr(event(t, `{"type":"message","subtype":"message_changed","channel":"C1","ts":"103.0","message":{"ts":"100.1","text":"x"}}`))},
			"C1", ""},
		{"slash command", envelope{slash: &slack.SlashCommand{ChannelID: "C1", TriggerID: "tr1"}}, "slash:C1", "slash:tr1"},
		{"click", envelope{action: &slack.InteractionCallback{Container: slack.Container{ChannelID: "C1", MessageTs: "105.0", ThreadTs: "100.1"}}},
			"C1:100.1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lane, done := route(tt.e)
			if lane != tt.lane || done != tt.done {
				t.Errorf("route = %q, %q; want %q, %q", lane, done, tt.lane, tt.done)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// acks collects acknowledgements.
type acks struct {
	mu  sync.Mutex
	ids []string
	ch  chan string
}

func newAcks() *acks { return &acks{ch: make(chan string, 16)} }

func (k *acks) ack(id string) func(any) {
	return func(any) {
		k.mu.Lock()
		k.ids = append(k.ids, id)
		k.mu.Unlock()
		k.ch <- id
	}
}

func (k *acks) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-k.ch:
		return id
	case <-time.After(5 * time.Second):
		t.Fatal("no acknowledgement")
		return ""
	}
}

// none checks that nothing was acknowledged so far.
func (k *acks) none(t *testing.T) {
	t.Helper()
	select {
	case id := <-k.ch:
		t.Fatalf("%s acknowledged too early", id)
	default:
	}
}

// TestRedeliveryAckedOnceDurable: Slack redelivers an envelope acknowledged
// late (a new envelope id, retry_attempt 1); the redelivery waits behind
// the first in its lane, and is acknowledged without being handled again
// once the first is durable.
func TestRedeliveryAckedOnceDurable(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, withAuthorizer(h))
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	h.answer = func(c core.Command) (core.Result, error) {
		entered <- struct{}{}
		<-release // a slow append
		return core.Result{Session: "S1"}, nil
	}
	k := newAcks()
	ev := event(t, `{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"101.0","thread_ts":"100.1"}`)
	ctx := t.Context()
	a.accept(ctx, h, envelope{id: "E1", event: &ev, ack: k.ack("E1")})
	a.accept(ctx, h, envelope{id: "E2", retry: 1, event: &ev, ack: k.ack("E2")})
	<-entered
	k.none(t) // nothing before the append
	close(release)
	if first, second := k.next(t), k.next(t); first != "E1" || second != "E2" {
		t.Errorf("acknowledged %s then %s, want E1 then E2", first, second)
	}
	if n := len(h.commands()); n != 1 {
		t.Errorf("the handler saw %d commands, want 1: %q", n, shows(h.commands()))
	}
}

// TestLanesIndependent: a conversation held up does not hold up another's
// acknowledgement.
func TestLanesIndependent(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, withAuthorizer(h))
	release := make(chan struct{})
	defer close(release)
	h.answer = func(c core.Command) (core.Result, error) {
		if c.Place.Thread == "100.1" {
			<-release
		}
		return core.Result{Session: "S1"}, nil
	}
	k := newAcks()
	slow := event(t, `{"type":"message","channel":"C1","user":"U1","text":"big","ts":"101.0","thread_ts":"100.1"}`)
	fast := event(t, `{"type":"message","channel":"C1","user":"U1","text":"small","ts":"201.0","thread_ts":"200.1"}`)
	a.accept(t.Context(), h, envelope{id: "slow", event: &slow, ack: k.ack("slow")})
	a.accept(t.Context(), h, envelope{id: "fast", event: &fast, ack: k.ack("fast")})
	if got := k.next(t); got != "fast" {
		t.Errorf("acknowledged %s first, want fast", got)
	}
}

// TestNotAckedWhenNotStored: while the handler fails, the envelope is
// retried and not acknowledged; when parley stops first, it never is, and
// Slack delivers it again.
func TestNotAckedWhenNotStored(t *testing.T) {
	h := newRecorder("U1")
	a := newTestAdapter(t, nil, withAuthorizer(h))
	var mu sync.Mutex
	fails := 2
	h.answer = func(core.Command) (core.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return core.Result{}, errors.New("store busy")
		}
		return core.Result{Session: "S1"}, nil
	}
	k := newAcks()
	ev := event(t, `{"type":"message","channel":"C1","user":"U1","text":"x","ts":"101.0","thread_ts":"100.1"}`)
	a.accept(t.Context(), h, envelope{id: "E1", event: &ev, ack: k.ack("E1")})
	k.next(t)
	if n := len(h.commands()); n != 3 {
		t.Errorf("handled %d times, want 3 (two failures, then stored)", n)
	}

	failed := make(chan struct{}, 1)
	h.answer = func(core.Command) (core.Result, error) {
		select {
		case failed <- struct{}{}:
		default:
		}
		return core.Result{}, errors.New("store down")
	}
	ctx, cancel := context.WithCancel(t.Context())
	ev2 := event(t, `{"type":"message","channel":"C1","user":"U1","text":"y","ts":"102.0","thread_ts":"100.1"}`)
	a.accept(ctx, h, envelope{id: "E2", event: &ev2, ack: k.ack("E2")})
	<-failed
	cancel()
	a.lanes.wait()
	k.none(t)
}
