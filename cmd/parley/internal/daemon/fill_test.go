package daemon_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// TestFillDataDir is a load tool, not a test: with PARLEY_FILL_DIR set it
// fills that data directory with PARLEY_FILL_SESSIONS sessions (default
// 100,000) the way people and agents would, through the command service and
// a platform adapter (the fake), so that start-up and listing can be
// measured on a big data directory with `parley serve --data-dir`. Each
// session is started by a person's message at its own platform thread (a
// dedup key, a cleanup-ledger row), answered by the agent (journaled,
// delivered, confirmed) and its turn ended; one in a hundred is closed.
//
//	PARLEY_FILL_DIR=/tmp/parley-100k go test ./cmd/parley/internal/daemon -run '^TestFillDataDir$' -v -timeout 1h
//
// testdata/measure-serve.sh then measures a parley binary on it: start-up
// until /api/health answers, /api/sessions latency and the daemon's memory.
func TestFillDataDir(t *testing.T) {
	dir := os.Getenv("PARLEY_FILL_DIR")
	if dir == "" {
		t.Skip("a load tool: set PARLEY_FILL_DIR (and PARLEY_FILL_SESSIONS) to fill a data directory")
	}
	n := 100_000
	if s := os.Getenv("PARLEY_FILL_SESSIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("PARLEY_FILL_SESSIONS=%q is not a positive number", s)
		}
	}
	h := newHarness(t, telegramLike(), func(o *daemon.Options) {
		o.DataDir = dir
		// Durable writes are not what is measured here, and fsyncing
		// 400,000 commits would take the afternoon.
		o.Store.NoSync = true
	})
	ctx := context.Background()
	start := time.Now()
	var next, done atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				// People and agents do not outrun the platforms for
				// hours; a backlog of tens of thousands of sends would
				// measure the outbox's scan of its queue instead.
				for h.d.Outbox.Stats().Pending > 64 {
					<-time.After(time.Millisecond)
				}
				if err := fillOne(ctx, h, i); err != nil {
					t.Error(err)
					return
				}
				if d := done.Add(1); d%10_000 == 0 {
					t.Logf("%d sessions in %s", d, time.Since(start).Round(time.Second))
				}
			}
		})
	}
	wg.Wait()
	h.drain()
	t.Logf("%d sessions in %s", n, time.Since(start).Round(time.Second))
}

// fillOne makes session number i as a person and an agent would.
func fillOne(ctx context.Context, h *harness, i int64) error {
	place := core.Place{Chat: "-1001234567890", Thread: strconv.FormatInt(i, 10)}
	in, err := h.d.Service.Handle(ctx, core.Command{Kind: core.SendMessage, Origin: "fake", Place: place,
		Actor: core.Actor{ID: "42", Name: "Ann"}, PlatformID: fmt.Sprint("update-", i),
		Ref:  core.MessageRef{Adapter: "fake", Place: place, ID: fmt.Sprint("in-", i)},
		Text: fmt.Sprintf("Session %d: the build fails on main since this morning, can you look?", i)})
	if err != nil {
		return fmt.Errorf("session %d: person's message: %w", i, err)
	}
	for _, cmd := range []core.Command{
		{Kind: core.AssistantPost, Origin: core.OriginMCP, Session: in.Session,
			Text: "Found it: a test depended on the time zone. Fixed in the last commit; the build is green again."},
		{Kind: core.YieldTurn, Origin: core.OriginMCP, Session: in.Session},
	} {
		if _, err := h.d.Service.Handle(ctx, cmd); err != nil {
			return fmt.Errorf("session %d: %s: %w", i, cmd.Kind, err)
		}
	}
	if i%100 == 0 {
		if _, err := h.d.Service.Handle(ctx, core.Command{Kind: core.Close, Origin: core.OriginMCP, Session: in.Session}); err != nil {
			return fmt.Errorf("session %d: close: %w", i, err)
		}
	}
	return nil
}
