package postgres

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
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
		waitFor(t, 50*time.Millisecond)
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
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b")
	la, _, err := a.AcquireLease(ctx, "poll", 500*time.Millisecond)
	must(t, err)
	// The fenced write, in a transaction left open: the statement ran, its
	// commit has not come yet.
	tx, err := a.pool.Begin(ctx)
	must(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck
	var n int
	must(t, tx.QueryRow(ctx, fence+`, w AS (INSERT INTO cursors (name, value) SELECT $1, $2 FROM l)
SELECT count(*) FROM l`, []byte("offset"), []byte("7"), la.Name, string(la.Holder), la.Token).Scan(&n))
	if n != 1 {
		t.Fatal("the fenced write found no holding")
	}
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
	if !r.ok || r.l.Token != 2 {
		t.Fatalf("takeover after the commit = %+v", r)
	}
	if v := cursor(t, b, "offset"); v != "7" {
		t.Errorf("cursor = %q, want the write committed before the takeover", v)
	}
	if err := a.SetCursorFenced(ctx, "offset", "8", la); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("fenced write after the takeover: %v", err)
	}
}

// Fenced writes go on while the holder renews, at the same time.
func TestLeaseFencedWritesWhileRenewing(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a := openInstance(t, srv.URL, "a")
	h, err := core.Hold(ctx, a, "poll", core.HoldOptions{TTL: 600 * time.Millisecond, Renew: 50 * time.Millisecond,
		Retry: 20 * time.Millisecond, Margin: 200 * time.Millisecond})
	must(t, err)
	defer h.Release(ctx) //nolint:errcheck
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				if err := a.SetCursorFenced(ctx, fmt.Sprint("c", w), fmt.Sprint(i), h.Lease()); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost the lease while writing: %v", context.Cause(h.Context()))
	}
	if v := cursor(t, a, "c3"); v != "99" {
		t.Errorf("cursor c3 = %q", v)
	}
}

// A clean release hands the lease over to a waiting instance at its next
// attempt: well under the 2 s goal.
func TestLeaseCleanHandover(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	ids := []core.InstanceID{"a", "b", "c"}
	held := make(chan *core.Held, len(ids))
	for _, id := range ids {
		s := openInstance(t, srv.URL, id)
		go func() {
			h, err := core.Hold(ctx, s, "poll", core.HoldOptions{})
			if err != nil {
				t.Error(err)
				return
			}
			held <- h
		}()
	}
	h := <-held
	var worst time.Duration
	for round := range 2 {
		must(t, h.Context().Err())
		released := time.Now()
		must(t, h.Release(ctx))
		next := <-held
		took := time.Since(released)
		worst = max(worst, took)
		t.Logf("handover %d: from %s to %s in %s", round, h.Lease().Holder, next.Lease().Holder, took.Round(time.Millisecond))
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
	if worst >= 2*time.Second {
		t.Errorf("a clean handover took %s, goal < 2s", worst)
	}
}

// A holder whose renewals fail (PostgreSQL stopped) stops acting on its own
// clock before the lease expires by the database's: at most TTL-Margin
// after its last successful renewal, so before the row's expiry.
func TestLeaseHolderStopsWhenTheDatabaseIsGone(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a := openInstance(t, srv.URL, "a")
	h, err := core.Hold(ctx, a, "poll", core.HoldOptions{})
	must(t, err)
	defer h.Release(ctx) //nolint:errcheck
	// Let a few renewals succeed, then take the database away.
	waitFor(t, 2*core.LeaseRenew+time.Second)
	if err := h.Context().Err(); err != nil {
		t.Fatalf("lost before the stop: %v", context.Cause(h.Context()))
	}
	expiresBefore := h.Lease().Expires
	stopped := time.Now()
	must(t, srv.Stop("immediate"))
	var lost time.Time
	select {
	case <-h.Context().Done():
		lost = time.Now()
	case <-time.After(core.LeaseTTL + 5*time.Second):
		t.Fatal("the holder acts on after its renewals failed for longer than the TTL")
	}
	t.Logf("stopped acting %s after PostgreSQL stopped; the last renewal had the row expire %s after that",
		lost.Sub(stopped).Round(time.Millisecond), expiresBefore.Sub(stopped).Round(time.Millisecond))
	if !errors.Is(context.Cause(h.Context()), core.ErrLeaseLost) {
		t.Errorf("cause = %v", context.Cause(h.Context()))
	}
	if d := lost.Sub(stopped); d > core.LeaseTTL-core.LeaseMargin {
		t.Errorf("stopped acting %s after the database, more than TTL-margin", d)
	}
	must(t, srv.Start())
	// Same machine, same clock: the row's expiry (the database's clock)
	// is after the moment the holder stopped, by about the margin.
	var expires time.Time
	for attempt := 0; ; attempt++ {
		err = a.pool.QueryRow(ctx, `SELECT expires FROM leases WHERE name = 'poll'`).Scan(&expires)
		if err == nil || attempt == 3 {
			break
		}
	}
	must(t, err)
	t.Logf("the row expired %s after the holder stopped", expires.Sub(lost).Round(time.Millisecond))
	if !expires.After(lost) {
		t.Errorf("the row expired at %s, before the holder stopped at %s", expires, lost)
	}
	// Once restarted, another instance takes over after the expiry.
	b := openInstance(t, srv.URL, "b")
	hb, err := core.Hold(ctx, b, "poll", core.HoldOptions{})
	must(t, err)
	if took := time.Since(expires); took < 0 {
		t.Errorf("taken over %s before the expiry", -took)
	}
	if err := a.SetCursorFenced(ctx, "offset", "1", h.Lease()); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("the stopped holder's fenced write: %v", err)
	}
	must(t, hb.Release(ctx))
}

// waitFor lets d of real time pass: the lease's own timers run meanwhile.
func waitFor(t *testing.T, d time.Duration) {
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
		waitFor(t, 20*time.Millisecond)
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

// holderEnv, when set, makes the test binary a lease holder instead (see
// TestMain): it holds lease "poll" on the database at this URL, says so on
// stdout and waits to be killed.
const holderEnv = "PARLEY_TEST_LEASE_HOLDER_URL"

// holdUntilKilled is the holder process of TestLeaseFailoverAfterKill.
func holdUntilKilled(url string) {
	s, err := Open(context.Background(), url, Options{Instance: "killed"})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	h, err := core.Hold(context.Background(), s, "poll", core.HoldOptions{})
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("held", h.Lease().Token)
	<-h.Context().Done()
	fmt.Println("lost:", context.Cause(h.Context()))
	os.Exit(1)
}

// The holder's process killed with SIGKILL (no release): another instance
// takes over once the lease expired, within TTL plus one attempt after the
// kill, well under the 10 s goal.
func TestLeaseFailoverAfterKill(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holderEnv+"="+srv.URL)
	out, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held 1\n" {
		t.Fatalf("the holder process said %q (%v)", line, err)
	}
	b := openInstance(t, srv.URL, "b")
	held := make(chan *core.Held, 1)
	go func() {
		h, err := core.Hold(ctx, b, "poll", core.HoldOptions{})
		if err != nil {
			t.Error(err)
		}
		held <- h
	}()
	// Let the holder renew a few times while b waits.
	waitFor(t, 2*core.LeaseRenew+core.LeaseRenew/3)
	select {
	case h := <-held:
		t.Fatalf("taken over (%+v) while the holder lives", h.Lease())
	default:
	}
	must(t, cmd.Process.Kill())
	killed := time.Now()
	var h *core.Held
	select {
	case h = <-held:
	case <-time.After(core.LeaseTTL + 5*time.Second):
		t.Fatal("no takeover after the holder was killed")
	}
	took := time.Since(killed)
	t.Logf("taken over %s after kill -9 (TTL %s, renewals every %s, attempts every %s)",
		took.Round(time.Millisecond), core.LeaseTTL, core.LeaseRenew, core.LeaseRetry)
	if h.Lease().Token != 2 {
		t.Errorf("token %d, want 2", h.Lease().Token)
	}
	if limit := core.LeaseTTL + core.LeaseRetry + time.Second; took > limit {
		t.Errorf("taken over %s after the kill, more than TTL + an attempt (%s)", took, limit)
	}
	must(t, h.Release(ctx))
}

// A holder whose database connections are killed keeps its lease: the
// failed renewal is tried again on a new connection, well before the
// stop.
func TestLeaseSurvivesKilledConnections(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a := openInstance(t, srv.URL, "a")
	admin, err := pgx.Connect(ctx, srv.URL)
	must(t, err)
	defer admin.Close(ctx)
	h, err := core.Hold(ctx, a, "poll", core.HoldOptions{})
	must(t, err)
	defer h.Release(ctx) //nolint:errcheck
	for range 3 {
		var n int
		must(t, admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE pid <> pg_backend_pid() AND datname = current_database() AND backend_type = 'client backend'`).Scan(&n))
		if n == 0 {
			t.Fatal("no connection of the holder to kill")
		}
		waitFor(t, core.LeaseRenew+core.LeaseRenew/2)
		must(t, h.Context().Err())
	}
	before := h.Lease().Expires
	waitFor(t, core.LeaseRenew+core.LeaseRenew/2)
	if err := h.Context().Err(); err != nil || !h.Lease().Expires.After(before) {
		t.Fatalf("not renewed after the connections were killed: %v", context.Cause(h.Context()))
	}
	must(t, a.SetCursorFenced(ctx, "offset", "1", h.Lease()))
}

// freezer is a TCP proxy to a server that can stop passing bytes, as a
// network that drops every packet does: statements hang rather than fail.
type freezer struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen chan struct{} // closed to freeze
	conns  []net.Conn
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	f := &freezer{ln: ln, frozen: make(chan struct{})}
	t.Cleanup(f.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, s)
			f.mu.Unlock()
			go f.pass(c, s)
			go f.pass(s, c)
		}
	}()
	return f
}

// pass copies from src to dst until frozen, then holds what it reads.
func (f *freezer) pass(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			_ = dst.Close()
			return
		}
		select {
		case <-f.frozen:
			continue
		default:
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (f *freezer) freeze() { close(f.frozen) }

// close cuts every connection, as a network that gives up does.
func (f *freezer) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		_ = c.Close()
	}
}

// A holder whose renewals hang (the network to the database drops
// everything) stops acting on its own clock, at most TTL-Margin after its
// last successful renewal, before another instance can take the lease;
// Release then returns instead of hanging with the renewal.
func TestLeaseHolderStopsWhenRenewalsHang(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	openInstance(t, srv.URL, "migrated") // the schema, before the freezer is in the way
	f := newFreezer(t, fmt.Sprintf("127.0.0.1:%d", srv.Port))
	a := openInstance(t, fmt.Sprintf("postgres://%s@%s/postgres?sslmode=disable", pgtest.User, f.ln.Addr()), "a")
	t.Cleanup(f.close) // before a is closed: its connections end at once
	h, err := core.Hold(ctx, a, "poll", core.HoldOptions{})
	must(t, err)
	waitFor(t, core.LeaseRenew+core.LeaseRenew/2)
	must(t, h.Context().Err())
	frozen := time.Now()
	f.freeze()
	b := openInstance(t, srv.URL, "b")
	taken := make(chan time.Time, 1)
	go func() {
		hb, err := core.Hold(ctx, b, "poll", core.HoldOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		taken <- time.Now()
		_ = hb.Release(ctx)
	}()
	var lost time.Time
	select {
	case <-h.Context().Done():
		lost = time.Now()
	case <-time.After(core.LeaseTTL + 5*time.Second):
		t.Fatal("the holder acts on while its renewals hang")
	}
	var tookAt time.Time
	select {
	case tookAt = <-taken:
	case <-time.After(core.LeaseTTL + 5*time.Second):
		t.Fatal("no takeover after the holder's renewals hung")
	}
	t.Logf("renewals hanging from %s: the holder stopped %s later, b took over %s after that",
		frozen.Format("15:04:05.000"), lost.Sub(frozen).Round(time.Millisecond), tookAt.Sub(lost).Round(time.Millisecond))
	if d := lost.Sub(frozen); d > core.LeaseTTL-core.LeaseMargin {
		t.Errorf("stopped %s after the renewals began to hang, more than TTL-margin", d)
	}
	if !tookAt.After(lost) {
		t.Errorf("b took over at %s, before a stopped at %s", tookAt, lost)
	}
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	released := make(chan error, 1)
	go func() { released <- h.Release(rctx) }()
	select {
	case err := <-released:
		if err == nil {
			t.Error("released through a frozen network")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Release hangs with the network")
	}
}
