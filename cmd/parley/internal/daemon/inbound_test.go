package daemon_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// The update a person sends, identical on every delivery of it.
var redelivered = core.Command{
	Kind: core.SendMessage, Origin: "fake", Place: core.Place{Chat: "dm", Thread: "1"},
	Text: "hello, are you there?", Actor: core.Actor{ID: "42"}, PlatformID: "update-7",
	Ref: core.MessageRef{Adapter: "fake", Place: core.Place{Chat: "dm", Thread: "1"}, ID: "m7"},
}

// TestUncleanStopChild is the process that dies: it takes the person's
// message, acknowledges it, and exits without closing anything.
func TestUncleanStopChild(t *testing.T) {
	dir := os.Getenv("PARLEY_TEST_UNCLEAN_DIR")
	if dir == "" {
		t.Skip("helper process for TestInboundSurvivesUncleanStop")
	}
	fk := fake.New("fake", telegramLike())
	d, err := daemon.Open(context.Background(), daemon.Options{DataDir: dir, Adapters: []core.Adapter{fk}})
	if err != nil {
		t.Fatal(err)
	}
	go d.Run(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fk.Deliver(ctx, redelivered); err != nil {
		t.Fatal(err)
	}
	os.Exit(0) // acknowledged; now die like kill -9: no Close, no drain
}

func TestInboundSurvivesUncleanStopExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestUncleanStopChild$")
	cmd.Env = append(os.Environ(), "PARLEY_TEST_UNCLEAN_DIR="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}

	h := newHarness(t, telegramLike(), func(o *daemon.Options) { o.DataDir = dir })
	// The platform did not see the acknowledgement and redelivers, twice.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		if err := h.fk.Deliver(ctx, redelivered); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := h.d.Store.Inbox(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || msgs[0].Content != redelivered.Text {
		t.Fatalf("inbox holds %d messages (%+v), want the one message exactly once", len(msgs), msgs)
	}
	res, err := h.d.Service.Handle(ctx, redelivered)
	if err != nil || !res.Duplicate || res.Message.ID != msgs[0].ID {
		t.Errorf("redelivery: %+v, %v; want Duplicate of %s", res, err, msgs[0].ID)
	}
}

func TestUnauthorizedInputIsIgnored(t *testing.T) {
	h := newHarness(t, telegramLike(), func(o *daemon.Options) {
		o.Allow = map[core.Origin][]string{"fake": {"42"}}
	})
	ctx := context.Background()
	cmd := redelivered
	cmd.Actor.ID = "666"
	if _, err := h.d.Service.Handle(ctx, cmd); !errors.Is(err, core.ErrUnauthorized) {
		t.Fatalf("got %v, want ErrUnauthorized", err)
	}
	msgs, _ := h.d.Store.Inbox(ctx, "", "", 0)
	sessions, _ := h.d.Store.Sessions(ctx)
	if len(msgs) != 0 || len(sessions) != 0 {
		t.Errorf("unauthorized input left %d messages and %d sessions", len(msgs), len(sessions))
	}
}

func TestInputWhileBusyIsQueuedNotDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newBubbleHarness(t, telegramLike())
		ctx := context.Background()
		sub, cancel := h.d.Bus.Subscribe(64, false)
		defer cancel()
		place := core.Place{Chat: "dm", Thread: "9"}
		h.say(place, "first")
		h.say(place, "second, while the agent works")
		synctest.Wait() // every event published is in sub.C now
		var queued []string
		for more := true; more; {
			select {
			case e := <-sub.C:
				if e.Kind == core.EventQueued {
					queued = append(queued, e.Message.Content)
				}
			default:
				more = false
			}
		}
		if len(queued) != 1 || queued[0] != "second, while the agent works" {
			t.Errorf("queued events for %q, want one, for the second message", queued)
		}
		msgs, _ := h.d.Store.Inbox(ctx, "", "", 0)
		if len(msgs) != 2 {
			t.Errorf("inbox has %d messages, want 2", len(msgs))
		}
	})
}
