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

// How a lease passes when its holder fails: the process killed, the
// database stopped, connections killed, a network that drops everything.

// A holder whose renewals fail (PostgreSQL stopped) stops acting on its own
// clock before the lease expires by the database's: at most TTL-Margin
// after its last successful renewal, so before the row's expiry.
func TestLeaseHolderStopsWhenTheDatabaseIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a := openInstance(t, srv.URL, "a")
	h, err := core.Hold(ctx, a, "poll", core.HoldOptions{})
	must(t, err)
	defer h.Release(ctx) //nolint:errcheck
	// Let a few renewals succeed, then take the database away.
	letPass(t, 2*core.LeaseRenew+time.Second)
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
	letPass(t, 2*core.LeaseRenew+core.LeaseRenew/3)
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
	t.Parallel()
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
		letPass(t, core.LeaseRenew+core.LeaseRenew/2)
		must(t, h.Context().Err())
	}
	before := h.Lease().Expires
	letPass(t, core.LeaseRenew+core.LeaseRenew/2)
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
	letPass(t, core.LeaseRenew+core.LeaseRenew/2)
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
