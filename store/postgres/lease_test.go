package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// openInstance opens a store on url acting as instance id (a parley
// process of its own: its own pool), closed when the test ends.
func openInstance(t *testing.T, url string, id core.InstanceID) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{Instance: id, MaxConns: 4})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func cursor(t *testing.T, s *Store, name string) string {
	t.Helper()
	v, err := s.Cursor(context.Background(), name)
	must(t, err)
	return v
}

// Three instances acquiring at once: exactly one is granted, every time,
// and the others are told who holds it.
func TestLeaseOneHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	ids := []core.InstanceID{"a", "b", "c"}
	var stores []*Store
	for _, id := range ids {
		stores = append(stores, openInstance(t, srv.URL, id))
	}
	for round := range 20 {
		name := fmt.Sprint("poll-", round)
		var wg sync.WaitGroup
		leases := make([]core.Lease, len(stores))
		granted := make([]bool, len(stores))
		for i, s := range stores {
			wg.Go(func() {
				var err error
				leases[i], granted[i], err = s.AcquireLease(ctx, name, core.LeaseTTL)
				if err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		winner := -1
		for i := range stores {
			if granted[i] {
				if winner >= 0 {
					t.Fatalf("round %d: granted to %s and %s", round, ids[winner], ids[i])
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: granted to nobody", round)
		}
		if l := leases[winner]; l.Token != 1 || l.Holder != ids[winner] {
			t.Errorf("round %d: the grant is %+v", round, l)
		}
		for i, l := range leases {
			// A loser's snapshot may predate the winner's insert.
			if i != winner && l.Holder != "" && l.Holder != ids[winner] {
				t.Errorf("round %d: %s was told %q holds it, not %s", round, ids[i], l.Holder, ids[winner])
			}
		}
		// The holder renews; the others still cannot take it.
		if _, err := stores[winner].RenewLease(ctx, leases[winner], core.LeaseTTL); err != nil {
			t.Fatal(err)
		}
		for i, s := range stores {
			if i != winner {
				if _, ok, err := s.AcquireLease(ctx, name, core.LeaseTTL); ok || err != nil {
					t.Errorf("round %d: %s took a held lease (%v)", round, ids[i], err)
				}
			}
		}
	}
	infos, err := stores[0].Leases(ctx)
	must(t, err)
	if len(infos) != 20 {
		t.Fatalf("%d leases listed, want 20", len(infos))
	}
	for _, i := range infos {
		if !i.Held || i.Mine != (i.Holder == "a") || i.Token != 1 {
			t.Errorf("listed %+v", i)
		}
	}
}

// Every new holding gets a larger token (a release, a takeover, and a
// holder acquiring again); a renewal keeps it; a fenced write counts only
// with the current one.
func TestLeaseTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b")
	la, ok, err := a.AcquireLease(ctx, "poll", time.Minute)
	if err != nil || !ok || la.Token != 1 {
		t.Fatalf("Acquire = %+v %v %v", la, ok, err)
	}
	must(t, a.SetCursorFenced(ctx, "offset", "10", la))
	la2, err := a.RenewLease(ctx, la, time.Minute)
	must(t, err)
	if la2.Token != 1 || !la2.Expires.After(la.Expires) {
		t.Errorf("renewed %+v from %+v", la2, la)
	}
	must(t, a.ReleaseLease(ctx, la))
	if err := a.SetCursorFenced(ctx, "offset", "11", la); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("fenced write after the release: %v", err)
	}
	if _, err := a.RenewLease(ctx, la, time.Minute); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("renewal after the release: %v", err)
	}
	lb, ok, err := b.AcquireLease(ctx, "poll", time.Minute)
	if err != nil || !ok || lb.Token != 2 {
		t.Fatalf("Acquire after the release = %+v %v %v", lb, ok, err)
	}
	// b acquiring again is a new holding: its earlier one is fenced off.
	lb3, ok, err := b.AcquireLease(ctx, "poll", time.Minute)
	if err != nil || !ok || lb3.Token != 3 {
		t.Fatalf("Acquire by the holder = %+v %v %v", lb3, ok, err)
	}
	if err := b.SetCursorFenced(ctx, "offset", "12", lb); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("fenced write of the earlier holding: %v", err)
	}
	// a's release of an old holding leaves b's alone.
	must(t, a.ReleaseLease(ctx, la))
	must(t, b.SetCursorFenced(ctx, "offset", "13", lb3))
	if v := cursor(t, a, "offset"); v != "13" {
		t.Errorf("cursor = %q, want 13", v)
	}
	// Saving "" forgets the cursor, fenced too.
	if err := a.SetCursorFenced(ctx, "offset", "", la); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("fenced delete by a stale holder: %v", err)
	}
	if v := cursor(t, a, "offset"); v != "13" {
		t.Errorf("a stale fenced delete removed the cursor: %q", v)
	}
	must(t, b.SetCursorFenced(ctx, "offset", "", lb3))
	if v := cursor(t, a, "offset"); v != "" {
		t.Errorf("cursor = %q after the fenced delete", v)
	}
	if _, _, err := a.AcquireLease(ctx, "", time.Minute); err == nil {
		t.Error("acquired a lease without a name")
	}
}

// A holder that stops renewing loses the lease once the TTL has passed by
// the database's clock, not before; then its fenced writes change nothing,
// whether or not another took the lease yet.
func TestLeaseExpires(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b")
	const ttl = 1500 * time.Millisecond
	start := time.Now()
	la, ok, err := a.AcquireLease(ctx, "poll", ttl)
	if err != nil || !ok {
		t.Fatalf("Acquire = %v %v", ok, err)
	}
	must(t, a.SetCursorFenced(ctx, "offset", "100", la))
	var lb core.Lease
	for {
		lb, ok, err = b.AcquireLease(ctx, "poll", ttl)
		must(t, err)
		if ok {
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatal("the lease never expired")
		}
		if lb.Holder != "a" {
			t.Errorf("b was told %q holds it", lb.Holder)
		}
		letPass(t, 50*time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("taken over %s after the grant (TTL %s)", took.Round(time.Millisecond), ttl)
	if took < ttl {
		t.Errorf("taken over %s after the grant, before the TTL %s", took, ttl)
	}
	if lb.Token != 2 {
		t.Errorf("the takeover's token is %d, want 2", lb.Token)
	}
	if err := a.SetCursorFenced(ctx, "offset", "101", la); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("stale holder's fenced write: %v, want ErrLeaseLost", err)
	}
	if _, err := a.RenewLease(ctx, la, ttl); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("stale holder's renewal: %v, want ErrLeaseLost", err)
	}
	if v := cursor(t, b, "offset"); v != "100" {
		t.Errorf("cursor = %q after the stale write, want 100", v)
	}
	must(t, b.SetCursorFenced(ctx, "offset", "102", lb))

	// Expired, not yet taken: the stale holder's write is refused too.
	lc, _, err := b.AcquireLease(ctx, "other", 100*time.Millisecond)
	must(t, err)
	eventually(t, "the lease expires", expired(t, b, "other"))
	if err := b.SetCursorFenced(ctx, "c", "x", lc); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("fenced write of an expired lease: %v", err)
	}
}

// A takeover waits for a fenced write in flight to commit, and the next
// fenced write of the old holder finds the new token: the two never
// interleave.
func TestLeaseTakeoverWaitsForFencedWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b")
	// The fenced write, in a transaction left open: the statement ran
	// while a held the lease, its commit has not come yet. Should the
	// lease have expired before the statement ran (a machine slower than
	// the TTL), that is no premise: a takes the lease again, for twice as
	// long, and writes again.
	var (
		la core.Lease
		tx pgx.Tx
	)
	for ttl := 500 * time.Millisecond; ; ttl *= 2 {
		var ok bool
		var err error
		if la, ok, err = a.AcquireLease(ctx, "poll", ttl); err != nil || !ok {
			t.Fatalf("Acquire = %v %v", ok, err)
		}
		tx, err = a.pool.Begin(ctx)
		must(t, err)
		var n int
		must(t, tx.QueryRow(ctx, fence+`, w AS (INSERT INTO cursors (name, value) SELECT $1, $2 FROM l)
SELECT count(*) FROM l`, []byte("offset"), []byte("7"), la.Name, string(la.Holder), la.Token).Scan(&n))
		if n == 1 {
			break
		}
		must(t, tx.Rollback(ctx))
		if ttl > time.Minute {
			t.Fatal("the fenced write found no holding, even for a lease of a minute")
		}
		t.Logf("the lease of %v expired before the fenced write ran; again", ttl)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	eventually(t, "the lease expires", expired(t, b, "poll"))
	type result struct {
		l  core.Lease
		ok bool
	}
	taken := make(chan result, 1)
	go func() {
		l, ok, err := b.AcquireLease(ctx, "poll", time.Minute)
		if err != nil {
			t.Error(err)
		}
		taken <- result{l, ok}
	}()
	eventually(t, "the takeover waits on the row lock", func() bool {
		var waiting bool
		must(t, b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO leases%')`).Scan(&waiting))
		return waiting
	})
	select {
	case r := <-taken:
		t.Fatalf("taken over (%+v) while a fenced write was in flight", r)
	default:
	}
	must(t, tx.Commit(ctx))
	r := <-taken
	if !r.ok || r.l.Token != la.Token+1 {
		t.Fatalf("takeover after the commit = %+v", r)
	}
	if v := cursor(t, b, "offset"); v != "7" {
		t.Errorf("cursor = %q, want the write committed before the takeover", v)
	}
	if err := a.SetCursorFenced(ctx, "offset", "8", la); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("fenced write after the takeover: %v", err)
	}
}

// Fenced writes go on while the holder renews, at the same time: the
// writers keep writing until the store has seen three renewals. The TTL is
// a minute, so that a renewal the loaded machine delays is no loss of the
// lease; the renewals still come every 50 ms.
func TestLeaseFencedWritesWhileRenewing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a := openInstance(t, srv.URL, "a")
	h, err := core.Hold(ctx, a, "poll", core.HoldOptions{TTL: time.Minute, Renew: 50 * time.Millisecond,
		Retry: 20 * time.Millisecond, Margin: 200 * time.Millisecond})
	must(t, err)
	defer h.Release(ctx) //nolint:errcheck
	expires := func() time.Time {
		infos, err := a.Leases(ctx)
		must(t, err)
		for _, i := range infos {
			if i.Name == "poll" {
				return i.Expires
			}
		}
		t.Fatal("no lease poll")
		return time.Time{}
	}
	renewed := make(chan struct{})
	var wg sync.WaitGroup
	last := make([]int, 4)
	for w := range last {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-renewed:
					return
				default:
				}
				if err := a.SetCursorFenced(ctx, fmt.Sprint("c", w), fmt.Sprint(i), h.Lease()); err != nil {
					t.Error(err)
					return
				}
				last[w] = i
			}
		})
	}
	prev, renewals := expires(), 0
	eventually(t, "three renewals while writing", func() bool {
		if e := expires(); !e.Equal(prev) {
			prev, renewals = e, renewals+1
		}
		return renewals >= 3
	})
	close(renewed)
	wg.Wait()
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost the lease while writing: %v", context.Cause(h.Context()))
	}
	for w, i := range last {
		if v := cursor(t, a, fmt.Sprint("c", w)); v != fmt.Sprint(i) {
			t.Errorf("cursor c%d = %q, want %d, the last written", w, v, i)
		}
	}
}

// A clean release hands the lease over to a waiting instance at its next
// attempt, not when it expires: the TTL is an hour, so a handover within
// the test's minute is the release's. How long it took is logged; the
// goal (the next attempt, 0.5 s) is the core package's timing, not this
// machine's.
func TestLeaseCleanHandover(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	ids := []core.InstanceID{"a", "b", "c"}
	held := make(chan *core.Held, len(ids))
	for _, id := range ids {
		s := openInstance(t, srv.URL, id)
		go func() {
			h, err := core.Hold(ctx, s, "poll", core.HoldOptions{TTL: time.Hour})
			if err != nil {
				t.Error(err)
				return
			}
			held <- h
		}()
	}
	h := <-held
	for round := range 2 {
		must(t, h.Context().Err())
		released := time.Now()
		must(t, h.Release(ctx))
		var next *core.Held
		select {
		case next = <-held:
		case <-time.After(time.Minute):
			t.Fatalf("handover %d: no waiter took the lease within a minute of its release", round)
		}
		t.Logf("handover %d: from %s to %s in %s", round, h.Lease().Holder, next.Lease().Holder, time.Since(released).Round(time.Millisecond))
		if next.Lease().Token != h.Lease().Token+1 || next.Lease().Holder == h.Lease().Holder {
			t.Errorf("handed over from %+v to %+v", h.Lease(), next.Lease())
		}
		select {
		case other := <-held:
			t.Fatalf("two holders: %+v and %+v", next.Lease(), other.Lease())
		default:
		}
		h = next
	}
	must(t, h.Release(ctx))
}

// letPass lets d of real time pass: the lease's own timers run meanwhile.
func letPass(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-time.After(d):
	case <-t.Context().Done():
	}
}

// eventually polls cond every 20 ms until it holds, failing the test after
// 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10s", what)
		}
		letPass(t, 20*time.Millisecond)
	}
}

// expired reports whether s lists lease name as not held.
func expired(t *testing.T, s *Store, name string) func() bool {
	return func() bool {
		infos, err := s.Leases(context.Background())
		must(t, err)
		for _, i := range infos {
			if i.Name == name {
				return !i.Held
			}
		}
		return false
	}
}
