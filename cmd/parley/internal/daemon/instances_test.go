package daemon_test

import (
	"context"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// Two daemons on one PostgreSQL: each one's WaitIdle waits for what it
// published itself, delivered, and returns although the other committed
// later (the store's last seq is the other's, which this one's consumers
// never see; it waited until this one happened to commit again, about
// 30 s here). Each answer reached its own platform by then. The 10 s
// deadlines are functional: it returns within milliseconds.
func TestWaitIdleWithTwoInstances(t *testing.T) {
	srv := pgtest.Start(t)
	url := func(o *daemon.Options) { o.StoreURL = srv.URL }
	a, b := newHarness(t, telegramLike(), url), newHarness(t, telegramLike(), url)
	ida, idb := a.newSession("on a"), b.newSession("on b")
	b.post(idb, "from b")
	a.post(ida, "from a") // the store's last seq is a's now
	lastA, err := a.d.Store.LastEventSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]*harness{"b": b, "a": a} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := h.d.WaitIdle(ctx); err != nil {
			t.Fatalf("%s's WaitIdle with the store at seq %d: %v", name, lastA, err)
		}
		cancel()
	}
	// WaitIdle returned once the answers were delivered, not merely
	// consumed: each is on its platform already.
	if got := texts(a.fk, a.place(ida), core.KindAssistant); got["from a"] != 1 {
		t.Errorf("a's platform shows %v after a's WaitIdle", got)
	}
	if got := texts(b.fk, b.place(idb), core.KindAssistant); got["from b"] != 1 {
		t.Errorf("b's platform shows %v after b's WaitIdle", got)
	}
	// And later commits of the other instance do not hold it up.
	a.post(ida, "again from a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.d.WaitIdle(ctx); err != nil {
		t.Fatalf("b's WaitIdle after a committed again: %v", err)
	}
}
