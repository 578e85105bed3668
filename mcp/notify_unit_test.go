package mcp

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

// The registry's tests run in synctest bubbles: the coalescing window and
// the retry backoff elapse on the fake clock, so each send is checked at its
// exact instant, and a check that nothing more is sent waits no real time.

// note is one notification a fakeSender sent, and when.
type note struct {
	at   time.Time
	uri  string
	msgs []InboxMessage
}

// fakeSender records what a subscriber's consumer sends. Before each send
// it runs hook, whose error (if any) the send returns.
type fakeSender struct {
	t    *testing.T
	sent chan note
	hook atomic.Pointer[func() error]
	wake chan struct{}
}

// newFakeSender must be called inside the test's bubble.
func newFakeSender(t *testing.T) *fakeSender {
	return &fakeSender{t: t, sent: make(chan note, 64), wake: make(chan struct{}, 1)}
}

func (f *fakeSender) send(uri string, msgs []wireMsg) error {
	if h := f.hook.Load(); h != nil {
		if err := (*h)(); err != nil {
			return err
		}
	}
	var ms []InboxMessage
	if msgs != nil {
		if err := json.Unmarshal(appendMessages(nil, msgs), &ms); err != nil {
			f.t.Error(err)
		}
	}
	f.sent <- note{at: time.Now(), uri: uri, msgs: ms}
	return nil
}

// consume runs key's consumer with f, as a connection's goroutine does,
// until the test ends.
func (f *fakeSender) consume(t *testing.T, r *registry, key string) {
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		_ = r.deliver(key, f.wake, done, nil, f.send, nil, nil)
	}()
	t.Cleanup(func() { close(done); <-ended })
}

// next waits for the next notification, letting fake time pass until one
// is sent.
func (f *fakeSender) next(t *testing.T) note {
	t.Helper()
	select {
	case n := <-f.sent:
		return n
	case <-time.After(waitFor):
		t.Fatal("nothing sent")
		return note{}
	}
}

// none checks that nothing is sent in the next minute, far longer than
// the window and the longest retry backoff.
func (f *fakeSender) none(t *testing.T) {
	t.Helper()
	time.Sleep(time.Minute)
	synctest.Wait()
	select {
	case n := <-f.sent:
		t.Fatalf("unexpected send %+v", n)
	default:
	}
}

func msg(i int) InboxMessage {
	return InboxMessage{ID: core.MessageID(fmt.Sprint(i)), Content: fmt.Sprint(i)}
}

// TestRegistryCoalesce: the first message goes out at once, the ones that
// arrive within the window after it go out together when it ends; scopes
// filter.
func TestRegistryCoalesce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(200*time.Millisecond, testLogger())
		defer r.close()
		f := newFakeSender(t)
		r.add("k", f.wake, "u", "A")
		f.consume(t, r, "k")
		start := time.Now()
		r.publish("A", msg(1))
		if n := f.next(t); n.uri != "u" || fmt.Sprint(contents(n.msgs)) != "[1]" || n.at != start {
			t.Fatalf("first send %s %v at +%s, want [1] at once", n.uri, contents(n.msgs), n.at.Sub(start))
		}
		time.Sleep(50 * time.Millisecond)
		for i := 2; i <= 4; i++ {
			r.publish("A", msg(i))
		}
		r.publish("B", msg(99)) // another session: not covered
		if n := f.next(t); fmt.Sprint(contents(n.msgs)) != "[2 3 4]" || n.at.Sub(start) != 200*time.Millisecond {
			t.Fatalf("coalesced send %v at +%s, want [2 3 4] when the window ends, at +200ms", contents(n.msgs), n.at.Sub(start))
		}
		f.none(t)
		if r.count() != 1 {
			t.Fatalf("count %d", r.count())
		}
		r.remove("k", "u")
		if r.count() != 0 {
			t.Fatalf("count %d after remove", r.count())
		}
	})
}

// TestRegistryBatches: a large coalesced batch is split into notifications
// of at most maxBatch messages.
func TestRegistryBatches(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(time.Millisecond, testLogger())
		defer r.close()
		f := newFakeSender(t)
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
		r.add("k", f.wake, "u", "")
		f.consume(t, r, "k")
		start := time.Now()
		r.publish("A", msg(0))
		<-entered
		for i := 1; i <= maxBatch+5; i++ { // queued while the first send blocks
			r.publish("A", msg(i))
		}
		open()
		f.next(t)
		if n := f.next(t); len(n.msgs) != maxBatch || n.at.Sub(start) != time.Millisecond {
			t.Fatalf("batch of %d at +%s, want %d after the 1ms window", len(n.msgs), n.at.Sub(start), maxBatch)
		}
		if n := f.next(t); len(n.msgs) != 5 || n.at.Sub(start) != time.Millisecond {
			t.Fatalf("rest of %d at +%s, want 5 with the batch", len(n.msgs), n.at.Sub(start))
		}
	})
}

// TestRegistrySlowSubscriber: a subscriber whose stream does not drain
// neither blocks the publisher nor grows without bound; once it drains it
// is told to re-read (a bare {uri}).
func TestRegistrySlowSubscriber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(time.Millisecond, testLogger())
		defer r.close()
		slow, fast := newFakeSender(t), newFakeSender(t)
		entered, gate := make(chan struct{}), make(chan struct{})
		open := sync.OnceFunc(func() { close(gate) })
		defer open() // before the consumer's end, which waits for the blocked send
		var calls atomic.Int32
		hook := func() error {
			if calls.Add(1) == 1 {
				close(entered)
				<-gate
			}
			return nil
		}
		slow.hook.Store(&hook)
		r.add("slow", slow.wake, "u", "")
		r.add("fast", fast.wake, "u", "")
		slow.consume(t, r, "slow")
		fast.consume(t, r, "fast")
		r.publish("A", msg(-1))
		<-entered
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; i < 10*maxQueued; i++ {
				r.publish("A", msg(i))
			}
		}()
		synctest.Wait() // no time passes: publishing never waits for a subscriber
		select {
		case <-done:
		default:
			t.Fatal("publishing blocked on a slow subscriber")
		}
		fast.next(t) // messages, or a bare uri if even it fell behind
		open()
		if n := slow.next(t); len(n.msgs) != 1 {
			t.Fatalf("first send %v", contents(n.msgs))
		}
		if n := slow.next(t); n.uri != "u" || n.msgs != nil {
			t.Fatalf("after the overflow: %s %v, want a bare uri", n.uri, contents(n.msgs))
		}
		slow.none(t)
	})
}

// TestRegistryBlockedAndGone: a full stream is retried with a bare {uri}
// after the least backoff; a gone one drops the subscriber.
func TestRegistryBlockedAndGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(time.Millisecond, testLogger())
		defer r.close()
		f := newFakeSender(t)
		var calls atomic.Int32
		blocked := func() error {
			if calls.Add(1) == 1 {
				return errBlocked
			}
			return nil
		}
		f.hook.Store(&blocked)
		r.add("k", f.wake, "u", "")
		f.consume(t, r, "k")
		start := time.Now()
		r.publish("A", msg(1))
		if n := f.next(t); n.uri != "u" || n.msgs != nil || n.at.Sub(start) != retryMin {
			t.Fatalf("retry sent %s %v at +%s, want a bare uri at +%s", n.uri, contents(n.msgs), n.at.Sub(start), retryMin)
		}
		gone := func() error { return errGone }
		f.hook.Store(&gone)
		r.publish("A", msg(2)) // in the 1ms window after the retry
		synctest.Wait()
		if r.count() != 1 {
			t.Fatal("the subscriber was dropped before its next send")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if r.count() != 0 {
			t.Fatal("a gone subscriber was not dropped when the window ended")
		}
	})
}
