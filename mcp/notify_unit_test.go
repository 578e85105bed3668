package mcp

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// fakeSender records what a subscriber's worker sends. Before each send
// it runs hook, whose error (if any) the send returns.
type fakeSender struct {
	sent chan map[string]any
	hook atomic.Pointer[func() error]
}

func newFakeSender() *fakeSender { return &fakeSender{sent: make(chan map[string]any, 64)} }

func (f *fakeSender) send(params map[string]any) error {
	if h := f.hook.Load(); h != nil {
		if err := (*h)(); err != nil {
			return err
		}
	}
	f.sent <- params
	return nil
}

func (f *fakeSender) next(t *testing.T) (uri string, msgs []wireMessage) {
	t.Helper()
	select {
	case p := <-f.sent:
		ms, _ := p["messages"].([]wireMessage)
		return p["uri"].(string), ms
	case <-time.After(waitFor):
		t.Fatal("nothing sent")
		return "", nil
	}
}

func (f *fakeSender) none(t *testing.T) {
	t.Helper()
	select {
	case p := <-f.sent:
		t.Fatalf("unexpected send %v", p)
	case <-time.After(quiet):
	}
}

func msg(i int) wireMessage {
	return wireMessage{ID: core.MessageID(fmt.Sprint(i)), Content: fmt.Sprint(i)}
}

// TestRegistryCoalesce: the first message goes out at once, the ones that
// arrive within the window after it go out together; scopes filter.
func TestRegistryCoalesce(t *testing.T) {
	r := newRegistry(200*time.Millisecond, testLogger())
	defer r.close()
	f := newFakeSender()
	r.add("k", func() sender { return f.send }, "u", "A")
	r.publish("A", msg(1))
	if uri, ms := f.next(t); uri != "u" || len(ms) != 1 || ms[0].Content != "1" {
		t.Fatalf("first send %s %v", uri, ms)
	}
	for i := 2; i <= 4; i++ {
		r.publish("A", msg(i))
	}
	r.publish("B", msg(99)) // another session: not covered
	if _, ms := f.next(t); len(ms) != 3 || ms[0].Content != "2" || ms[2].Content != "4" {
		t.Fatalf("coalesced send %v", ms)
	}
	f.none(t)
	if r.count() != 1 {
		t.Fatalf("count %d", r.count())
	}
	r.remove("k", "u")
	if r.count() != 0 {
		t.Fatalf("count %d after remove", r.count())
	}
}

// TestRegistryBatches: a large coalesced batch is split into notifications
// of at most maxBatch messages.
func TestRegistryBatches(t *testing.T) {
	r := newRegistry(time.Millisecond, testLogger())
	defer r.close()
	f := newFakeSender()
	entered, gate := make(chan struct{}), make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	defer open()
	first := true
	hook := func() error {
		if first {
			first = false
			close(entered)
			<-gate
		}
		return nil
	}
	f.hook.Store(&hook)
	r.add("k", func() sender { return f.send }, "u", "")
	r.publish("A", msg(0))
	<-entered
	for i := 1; i <= maxBatch+5; i++ { // queued while the first send blocks
		r.publish("A", msg(i))
	}
	open()
	f.next(t)
	if _, ms := f.next(t); len(ms) != maxBatch {
		t.Fatalf("batch of %d", len(ms))
	}
	if _, ms := f.next(t); len(ms) != 5 {
		t.Fatalf("rest of %d", len(ms))
	}
}

// TestRegistrySlowSubscriber: a subscriber whose stream does not drain
// neither blocks the publisher nor grows without bound; once it drains it
// is told to re-read (a bare {uri}).
func TestRegistrySlowSubscriber(t *testing.T) {
	r := newRegistry(time.Millisecond, testLogger())
	defer r.close()
	slow, fast := newFakeSender(), newFakeSender()
	entered, gate := make(chan struct{}), make(chan struct{})
	open := sync.OnceFunc(func() { close(gate) })
	defer open() // before r.close, which waits for the blocked worker
	var calls atomic.Int32
	hook := func() error {
		if calls.Add(1) == 1 {
			close(entered)
			<-gate
		}
		return nil
	}
	slow.hook.Store(&hook)
	r.add("slow", func() sender { return slow.send }, "u", "")
	r.add("fast", func() sender { return fast.send }, "u", "")
	r.publish("A", msg(-1))
	<-entered
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < 10*maxQueued; i++ {
			r.publish("A", msg(i))
		}
	}()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("publishing blocked on a slow subscriber")
	}
	fast.next(t) // messages, or a bare uri if even it fell behind
	open()
	if _, ms := slow.next(t); len(ms) != 1 {
		t.Fatalf("first send %v", ms)
	}
	if uri, ms := slow.next(t); uri != "u" || ms != nil {
		t.Fatalf("after the overflow: %s %v, want a bare uri", uri, ms)
	}
	slow.none(t)
}

// TestRegistryBlockedAndGone: a full stream is retried with a bare {uri};
// a gone one drops the subscriber.
func TestRegistryBlockedAndGone(t *testing.T) {
	r := newRegistry(time.Millisecond, testLogger())
	defer r.close()
	f := newFakeSender()
	var calls atomic.Int32
	blocked := func() error {
		if calls.Add(1) == 1 {
			return errBlocked
		}
		return nil
	}
	f.hook.Store(&blocked)
	r.add("k", func() sender { return f.send }, "u", "")
	r.publish("A", msg(1))
	if uri, ms := f.next(t); uri != "u" || ms != nil {
		t.Fatalf("retry sent %s %v, want a bare uri", uri, ms)
	}
	gone := func() error { return errGone }
	f.hook.Store(&gone)
	r.publish("A", msg(2))
	deadline := time.After(waitFor)
	for r.count() != 0 {
		select {
		case <-deadline:
			t.Fatal("a gone subscriber was not dropped")
		case <-time.After(time.Millisecond):
		}
	}
}
