package daemon_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cleanup"
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

// claimsTTL is how long the cleanup claims of TestCleanupClaimsAcrossInstances
// last unrenewed.
const claimsTTL = 3 * time.Second

// Deletions are carried out by the instance whose rule made them due: a
// second instance starting meanwhile replays none of them, nor do its
// scans take them while the first holds them (renewed while its platform
// is down and they wait in its outbox). When the first stops cleanly it
// releases them, and the second deletes each exactly once.
func TestCleanupClaimsAcrossInstances(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	shared := func(o *daemon.Options) {
		o.StoreURL = srv.URL
		o.DrainTimeout = 500 * time.Millisecond
		// Real time, on the database's clock: a keeps its claims only
		// while its renewals come within the TTL, so the TTL leaves a
		// loaded machine room (a renewal may come some 2.9 s late) and
		// the renewals come often.
		o.CleanupClaims = cleanup.ClaimOptions{TTL: claimsTTL, Renew: 100 * time.Millisecond, Scan: 50 * time.Millisecond}
	}
	a := newHarness(t, telegramLike(), shared)
	var ids []core.SessionID
	for i := range 3 {
		place := core.Place{Chat: "dm", Thread: fmt.Sprint("claims-", i)}
		a.say(place, "hello")
		ids = append(ids, a.sessionAt(place))
	}
	a.drain()
	for _, id := range ids {
		a.notice(id, "working on it", core.LifetimeNextNotice)
	}
	a.drain()
	st := a.d.Store // b's, once a stopped
	notices := func() []core.CleanupEntry {
		rows, err := st.Cleanup(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var out []core.CleanupEntry
		for _, r := range rows {
			if r.Lifetime == core.LifetimeNextNotice {
				out = append(out, r)
			}
		}
		return out
	}
	if n := len(notices()); n != 3 {
		t.Fatalf("%d notices in the ledger, want 3", n)
	}
	// The platform goes down; output starts in every session, so the
	// notices are due and their deletions wait in a's outbox.
	a.fk.SetDown(errors.New("fake: down"))
	for _, id := range ids {
		a.output(id, "output")
	}
	a.eventually("the notices due", func() bool {
		rows := notices()
		return len(rows) == 3 && !slices.ContainsFunc(rows, func(r core.CleanupEntry) bool { return !r.Due })
	})
	due := notices()

	b := newHarness(t, telegramLike(), shared)
	// Two of a's claim lifetimes: b's start-up and its scans every 50 ms
	// would have taken the deletions had a not renewed its claims.
	select {
	case <-ctx.Done():
	case <-time.After(2 * claimsTTL):
	}
	if ops := opsOf(b.fk, "delete"); len(ops) != 0 {
		t.Fatalf("b issued %d deletions a holds: %+v", len(ops), ops)
	}

	st = b.d.Store
	a.shutdown() // releases what its outbox could not do
	b.eventually("the ledger's due notices deleted", func() bool { return len(notices()) == 0 })
	byID := map[string]int{}
	for _, op := range opsOf(b.fk, "delete") {
		byID[op.ID]++
	}
	for _, r := range due {
		if byID[r.Ref.ID] != 1 {
			t.Errorf("b deleted %s %d times, want once (all: %v)", r.Ref.ID, byID[r.Ref.ID], byID)
		}
	}
	if len(byID) != len(due) {
		t.Errorf("b deleted %v, want only the %d released", byID, len(due))
	}
}

func opsOf(fk *fake.Adapter, method string) []fake.Op {
	var out []fake.Op
	for _, op := range fk.Ops() {
		if op.Method == method {
			out = append(out, op)
		}
	}
	return out
}
