package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// harness is a running daemon on a temporary data directory with one fake
// adapter, restartable on the same directory and the same fake platform.
type harness struct {
	t    testing.TB
	dir  string
	opts daemon.Options
	fk   *fake.Adapter
	d    *daemon.Daemon
	stop context.CancelFunc
	done chan error
	// bubble is set by newBubbleHarness: the daemon runs on a synctest
	// bubble's fake clock, and the harness waits by settling the bubble.
	bubble bool
}

func telegramLike() core.Capabilities {
	return core.Capabilities{
		MaxLength:    4096,
		LengthUnit:   core.UTF16,
		Markup:       core.MarkupMarkdown,
		DeleteOthers: true,
		Buttons:      true,
	}
}

func newHarness(tb testing.TB, caps core.Capabilities, tweak ...func(*daemon.Options)) *harness {
	tb.Helper()
	return openHarness(tb, caps, false, tweak...)
}

// newBubbleHarness is newHarness for a test running inside synctest.Test;
// everything it starts belongs to the bubble and runs on its fake clock. The
// clock being exact, the fake platform judges rate limits with no slack, and
// the harness's waits settle the bubble (synctest.Wait) instead of polling,
// so they let no time pass unless what they wait for needs it: times
// measured after them are exact.
func newBubbleHarness(t *testing.T, caps core.Capabilities, tweak ...func(*daemon.Options)) *harness {
	t.Helper()
	return openHarness(t, caps, true, tweak...)
}

func openHarness(tb testing.TB, caps core.Capabilities, bubble bool, tweak ...func(*daemon.Options)) *harness {
	tb.Helper()
	h := &harness{t: tb, dir: tb.TempDir(), fk: fake.New("fake", caps), bubble: bubble}
	if bubble {
		h.fk.Slack = 0
	}
	h.opts = daemon.Options{DataDir: h.dir, Adapters: []core.Adapter{h.fk}, DrainTimeout: 30 * time.Second}
	for _, f := range tweak {
		f(&h.opts)
	}
	h.start()
	tb.Cleanup(func() {
		if h.d != nil {
			h.shutdown()
		}
	})
	return h
}

func (h *harness) start() {
	h.t.Helper()
	d, err := daemon.Open(context.Background(), h.opts)
	if err != nil {
		h.t.Fatalf("open daemon: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.d, h.stop, h.done = d, cancel, make(chan error, 1)
	go func() { h.done <- d.Run(ctx) }()
}

// shutdown stops the daemon gracefully (drains the outbox).
func (h *harness) shutdown() {
	h.t.Helper()
	h.stop()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("run: %v", err)
		}
	case <-time.After(60 * time.Second):
		h.t.Fatal("daemon did not stop")
	}
	if err := h.d.Close(); err != nil {
		h.t.Errorf("close: %v", err)
	}
	h.d = nil
}

func (h *harness) restart() {
	h.t.Helper()
	h.shutdown()
	h.start()
}

// do runs a command as an agent or the API would.
func (h *harness) do(cmd core.Command) core.Result {
	h.t.Helper()
	res, err := h.d.Service.Handle(context.Background(), cmd)
	if err != nil {
		h.t.Fatalf("%s: %v", cmd.Kind, err)
	}
	return res
}

// say makes a person write text at place through the fake platform and
// waits until the daemon acknowledged it.
func (h *harness) say(place core.Place, text string) core.Command {
	h.t.Helper()
	cmd := h.fk.Receive(core.Command{Kind: core.SendMessage, Place: place, Text: text, Actor: core.Actor{ID: "42", Name: "Ann"}})
	h.eventually(fmt.Sprintf("message %q in an inbox", text), func() bool {
		msgs, err := h.d.Store.Inbox(context.Background(), "", "", 0)
		if err != nil {
			return false
		}
		for _, m := range msgs {
			if m.Ref == cmd.Ref {
				return true
			}
		}
		return false
	})
	return cmd
}

func (h *harness) session(id core.SessionID) core.Session {
	h.t.Helper()
	s, err := h.d.Store.Session(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// drain waits for the outbox to finish what is queued. In a bubble the
// clock advances only as far as the outbox's own pacing needs: it returns
// at the instant the last operation (and its confirmation) finished.
func (h *harness) drain() {
	h.t.Helper()
	bound := 90 * time.Second
	if h.bubble {
		bound = time.Hour // of fake time: pacing may take minutes
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if h.bubble {
		// Once the bubble is settled every event stored so far went
		// through the dispatcher and the ledger, and completion callbacks
		// (confirmations, ledger rows, notices they enqueue) have run.
		for {
			synctest.Wait()
			if s := h.d.Outbox.Stats(); s.Pending == 0 && s.InFlight == 0 {
				if n := h.d.Dispatcher.Delivering(); n > 0 {
					h.t.Fatalf("outbox idle, but %d journaled events never confirmed", n)
				}
				break
			}
			if err := h.d.Outbox.Drain(ctx); err != nil {
				h.t.Fatalf("outbox drain: %v", err)
			}
		}
	}
	// Outside a bubble this polls; in one it only confirms, with no wait.
	if err := h.d.WaitIdle(ctx); err != nil {
		h.t.Fatalf("outbox drain: %v", err)
	}
}

// eventually waits until cond holds. In a bubble it settles the bubble
// before each check, so what needs no time holds with none passed, and
// between checks lets the fake clock advance by a millisecond.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	if h.bubble {
		deadline := time.Now().Add(time.Minute)
		for {
			synctest.Wait()
			if cond() {
				return
			}
			if !time.Now().Before(deadline) {
				h.t.Fatalf("no %s within a minute of fake time", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			h.t.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// place returns where the session lives on the fake platform.
func (h *harness) place(id core.SessionID) core.Place {
	h.t.Helper()
	var p core.Place
	h.eventually("a binding", func() bool {
		b, ok := h.session(id).Bindings["fake"]
		p = b.Place
		return ok
	})
	return p
}

func opsAt(ops []fake.Op, place core.Place, methods ...string) []fake.Op {
	var out []fake.Op
	for _, op := range ops {
		if op.Place != place {
			continue
		}
		for _, m := range methods {
			if op.Method == m {
				out = append(out, op)
			}
		}
	}
	return out
}

func refused(ops []fake.Op) []fake.Op {
	var out []fake.Op
	for _, op := range ops {
		var rl *core.RateLimitError
		if errors.As(op.Err, &rl) {
			out = append(out, op)
		}
	}
	return out
}
