package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// leaseTable is a store's lease table in memory, with the store's clock
// being the bubble's: what store/postgres does in SQL, for the tests of the
// holder's loop on a fake clock.
type leaseTable struct {
	mu   sync.Mutex
	rows map[string]*Lease
	// renewErr, when set, fails renewals before they reach the table (an
	// unreachable database).
	renewErr error
	// hang makes renewals block until their context ends.
	hang bool
	// renewals are the times renewals reached the table, successful or not.
	renewals []time.Time
}

func newLeaseTable() *leaseTable { return &leaseTable{rows: map[string]*Lease{}} }

// instance is one instance's view of the table.
type instance struct {
	t  *leaseTable
	id InstanceID
}

var _ Leaser = instance{}

func (in instance) AcquireLease(ctx context.Context, name string, ttl time.Duration) (Lease, bool, error) {
	in.t.mu.Lock()
	defer in.t.mu.Unlock()
	now := time.Now()
	r := in.t.rows[name]
	if r == nil {
		r = &Lease{Name: name}
		in.t.rows[name] = r
	}
	if r.Holder != "" && r.Holder != in.id && now.Before(r.Expires) {
		return *r, false, nil
	}
	r.Holder, r.Token, r.Expires = in.id, r.Token+1, now.Add(ttl)
	return *r, true, nil
}

func (in instance) RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	in.t.mu.Lock()
	in.t.renewals = append(in.t.renewals, time.Now())
	hang, err := in.t.hang, in.t.renewErr
	in.t.mu.Unlock()
	if hang {
		<-ctx.Done()
		return Lease{}, ctx.Err()
	}
	if err != nil {
		return Lease{}, err
	}
	in.t.mu.Lock()
	defer in.t.mu.Unlock()
	r := in.t.rows[l.Name]
	now := time.Now()
	if r == nil || r.Holder != in.id || r.Token != l.Token || !now.Before(r.Expires) {
		return Lease{}, ErrLeaseLost
	}
	r.Expires = now.Add(ttl)
	return *r, nil
}

func (in instance) ReleaseLease(ctx context.Context, l Lease) error {
	in.t.mu.Lock()
	defer in.t.mu.Unlock()
	if r := in.t.rows[l.Name]; r != nil && r.Holder == in.id && r.Token == l.Token {
		r.Holder, r.Expires = "", time.Now()
	}
	return nil
}

func (in instance) Leases(ctx context.Context) ([]LeaseInfo, error) {
	in.t.mu.Lock()
	defer in.t.mu.Unlock()
	var out []LeaseInfo
	for _, r := range in.t.rows {
		out = append(out, LeaseInfo{Lease: *r, Mine: r.Holder == in.id, Held: r.Holder != "" && time.Now().Before(r.Expires)})
	}
	return out, nil
}

func (in instance) SetCursorFenced(ctx context.Context, name, value string, l Lease) error {
	return errors.New("not used by these tests")
}

// holder returns who holds name now, "" for nobody.
func (t *leaseTable) holder(name string) InstanceID {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.rows[name]; r != nil && time.Now().Before(r.Expires) {
		return r.Holder
	}
	return ""
}

// renewed returns the times renewals reached the table so far.
func (t *leaseTable) renewed() []time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]time.Time(nil), t.renewals...)
}

func (t *leaseTable) set(f func(t *leaseTable)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t)
}

// cancelledAt returns how long after start ctx was cancelled, waiting for
// at most limit of fake time.
func cancelledAt(t *testing.T, ctx context.Context, start time.Time, limit time.Duration) time.Duration {
	t.Helper()
	select {
	case <-ctx.Done():
		return time.Since(start)
	case <-time.After(limit):
		t.Fatalf("the holder's context is not cancelled after %s", limit)
		return 0
	}
}

// While renewals succeed the lease is kept, renewed exactly every Renew.
func TestHoldRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		start := time.Now()
		h, err := Hold(t.Context(), instance{tab, "a"}, "poll", HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if l := h.Lease(); l.Token != 1 || l.Holder != "a" || l.Name != "poll" {
			t.Errorf("lease = %+v, want token 1 held by a", l)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if err := h.Context().Err(); err != nil {
			t.Fatalf("context ended while renewals succeed: %v", context.Cause(h.Context()))
		}
		if len(tab.renewed()) != 30 {
			t.Errorf("%d renewals in a minute, want 30", len(tab.renewed()))
		}
		for i, at := range tab.renewed() {
			if want := time.Duration(i+1) * LeaseRenew; at.Sub(start) != want {
				t.Errorf("renewal %d at %s, want %s", i, at.Sub(start), want)
			}
		}
		if h.Lease().Expires != start.Add(time.Minute+LeaseTTL) {
			t.Errorf("expires %s after the start, want %s", h.Lease().Expires.Sub(start), time.Minute+LeaseTTL)
		}
		if err := h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := tab.holder("poll"); got != "" {
			t.Errorf("after Release the lease is held by %q", got)
		}
		if !errors.Is(context.Cause(h.Context()), context.Canceled) {
			t.Errorf("cause after Release = %v", context.Cause(h.Context()))
		}
		n := len(tab.renewed())
		time.Sleep(time.Minute)
		if len(tab.renewed()) != n {
			t.Errorf("renewed %d times after Release", len(tab.renewed())-n)
		}
	})
}

// Renewals that fail (the database unreachable) are retried every Retry;
// the holder stops exactly TTL-Margin after the send of its last
// successful renewal, on its own clock, a margin before the store would
// let another take the lease.
func TestHoldStopsOnItsOwnClock(t *testing.T) {
	for _, hang := range []bool{false, true} {
		t.Run(fmt.Sprint("hang=", hang), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				tab := newLeaseTable()
				start := time.Now()
				h, err := Hold(t.Context(), instance{tab, "a"}, "poll", HoldOptions{})
				if err != nil {
					t.Fatal(err)
				}
				// The renewal at 2 s succeeds, every one after fails.
				time.Sleep(LeaseRenew)
				synctest.Wait()
				tab.set(func(t *leaseTable) { t.renewErr, t.hang = errors.New("connection refused"), hang })
				got := cancelledAt(t, h.Context(), start, time.Minute)
				if want := LeaseRenew + LeaseTTL - LeaseMargin; got != want {
					t.Errorf("stopped %s after the grant, want %s (the last renewal at %s + TTL %s - margin %s)",
						got, want, LeaseRenew, LeaseTTL, LeaseMargin)
				}
				if holder := tab.holder("poll"); holder != "a" {
					t.Errorf("when the holder stopped the store says %q holds the lease, want still a", holder)
				}
				if !errors.Is(context.Cause(h.Context()), ErrLeaseLost) {
					t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(h.Context()))
				}
				var wantAt []time.Duration
				if hang {
					// One renewal, hanging until the stop.
					wantAt = []time.Duration{2 * time.Second, 4 * time.Second}
				} else {
					wantAt = []time.Duration{2 * time.Second, 4 * time.Second, 4500 * time.Millisecond, 5 * time.Second,
						5500 * time.Millisecond, 6 * time.Second, 6500 * time.Millisecond}
				}
				if len(tab.renewed()) != len(wantAt) {
					t.Fatalf("%d renewals, want %d", len(tab.renewed()), len(wantAt))
				}
				for i, at := range tab.renewed() {
					if at.Sub(start) != wantAt[i] {
						t.Errorf("renewal %d at %s, want %s", i, at.Sub(start), wantAt[i])
					}
				}
				// The store lets another take it only at 2 s + TTL.
				time.Sleep(LeaseMargin - time.Millisecond)
				if holder := tab.holder("poll"); holder != "a" {
					t.Errorf("the lease passed before the TTL: %q", holder)
				}
				time.Sleep(time.Millisecond)
				if _, ok, _ := (instance{tab, "b"}).AcquireLease(t.Context(), "poll", LeaseTTL); !ok {
					t.Error("another instance cannot take the lease after the TTL")
				}
				n := len(tab.renewed())
				time.Sleep(time.Minute)
				if len(tab.renewed()) != n {
					t.Errorf("a lost holder renewed %d times more", len(tab.renewed())-n)
				}
				_ = h.Release(context.Background())
				if holder := tab.rows["poll"].Holder; holder != "b" {
					t.Errorf("the lost holder's Release freed b's lease (holder %q)", holder)
				}
			})
		})
	}
}

// A renewal the store refuses (another took the lease) ends the holding at
// once.
func TestHoldLostWhenRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		start := time.Now()
		h, err := Hold(t.Context(), instance{tab, "a"}, "poll", HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		tab.set(func(t *leaseTable) { t.rows["poll"].Holder, t.rows["poll"].Token = "b", 2 })
		if got := cancelledAt(t, h.Context(), start, time.Minute); got != 4*time.Second {
			t.Errorf("stopped %s after the grant, want at the next renewal, 4s", got)
		}
		if !errors.Is(context.Cause(h.Context()), ErrLeaseLost) {
			t.Errorf("cause = %v, want ErrLeaseLost", context.Cause(h.Context()))
		}
	})
}

// Of three instances holding for the same name one holds it; a waiter
// takes it at its next attempt after a release, and after a holder died
// (stopped renewing) at the first attempt once the TTL has passed.
func TestHoldWaitsForTheHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		start := time.Now()
		type got struct {
			h  *Held
			at time.Duration
		}
		results := make(chan got, 3)
		for _, id := range []InstanceID{"a", "b", "c"} {
			go func() {
				h, err := Hold(t.Context(), instance{tab, id}, "poll", HoldOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				results <- got{h, time.Since(start)}
			}()
		}
		first := <-results
		synctest.Wait()
		if len(results) != 0 || first.at != 0 {
			t.Fatalf("%d more holders; the first at %s", len(results), first.at)
		}
		// A clean release at 3.2 s: a waiter takes over at its next
		// attempt, 3.5 s.
		time.Sleep(3200 * time.Millisecond)
		if err := first.h.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		second := <-results
		synctest.Wait()
		if second.at != 3500*time.Millisecond || len(results) != 0 {
			t.Errorf("taken over at %s with %d more holders, want at 3.5s by one", second.at, len(results))
		}
		// The second holder dies at 5 s (its process killed: no renewal,
		// no release): its grant at 3.5 s lasts until 9.5 s.
		time.Sleep(1500 * time.Millisecond)
		second.h.stopLoop()
		<-second.h.done
		third := <-results
		if third.at != 9500*time.Millisecond {
			t.Errorf("taken over after the holder died at %s, want at 9.5s (the TTL after its grant)", third.at)
		}
		if third.h.Lease().Token != 3 {
			t.Errorf("third token %d, want 3", third.h.Lease().Token)
		}
		if first.h.Waited() || !second.h.Waited() || !third.h.Waited() {
			t.Errorf("waited: %v, %v, %v; want only the ones that found another holder",
				first.h.Waited(), second.h.Waited(), third.h.Waited())
		}
		_ = third.h.Release(context.Background())
	})
}

// GiveUp frees the lease at once and says why in the context's cause.
func TestHoldGiveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		h, err := Hold(t.Context(), instance{tab, "a"}, "poll", HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conflict := errors.New("getUpdates: 409 Conflict")
		if err := h.GiveUp(context.Background(), conflict); err != nil {
			t.Fatal(err)
		}
		cause := context.Cause(h.Context())
		if !errors.Is(cause, ErrLeaseLost) || !errors.Is(cause, conflict) {
			t.Errorf("cause = %v, want ErrLeaseLost and the conflict", cause)
		}
		if got := tab.holder("poll"); got != "" {
			t.Errorf("after GiveUp the lease is held by %q", got)
		}
		if _, ok, _ := (instance{tab, "b"}).AcquireLease(t.Context(), "poll", LeaseTTL); !ok {
			t.Error("another instance cannot take a lease given up")
		}
	})
}

// Hold gives up waiting when its context ends; the holder's context ends
// with it, while the lease stays renewed until Release.
func TestHoldContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		other, err := Hold(t.Context(), instance{tab, "b"}, "poll", HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := Hold(ctx, instance{tab, "a"}, "poll", HoldOptions{}); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 10*time.Second {
			t.Errorf("Hold = %v after %s, want the deadline after 10s", err, time.Since(start))
		}

		parent, stop := context.WithCancel(t.Context())
		h, err := Hold(parent, instance{tab, "c"}, "other", HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stop()
		if h.Context().Err() == nil {
			t.Error("the holder's context outlives Hold's")
		}
		time.Sleep(time.Minute)
		if got := tab.holder("other"); got != "c" {
			t.Errorf("before Release the lease is held by %q, want still c", got)
		}
		_ = h.Release(context.Background())
		_ = other.Release(context.Background())
		if _, err := Hold(t.Context(), instance{tab, "a"}, "x", HoldOptions{Renew: 5 * time.Second}); err == nil {
			t.Error("Hold accepted a renewal interval that does not come before the stop")
		}
	})
}

// Lead runs the work while the lease is held, and again after it was lost
// and held anew; a conflict gives the lease to another instance and backs
// off from the TTL; another error ends Lead with the lease released.
func TestLead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		start := time.Now()
		type call struct {
			at    time.Duration
			token int64
		}
		var calls []call
		conflict := fmt.Errorf("getUpdates: 409: %w", ErrLeaseConflict)
		permanent := errors.New("token refused")
		done := make(chan error, 1)
		go func() {
			done <- Lead(t.Context(), instance{tab, "a"}, "poll", HoldOptions{}, func(h *Held) error {
				calls = append(calls, call{time.Since(start), h.Lease().Token})
				switch len(calls) {
				case 1:
					// The platform says another consumer is active.
					time.Sleep(1200 * time.Millisecond)
					return conflict
				case 2:
					// Lost: another instance takes the lease over.
					<-h.Context().Done()
					return nil
				default:
					time.Sleep(time.Second)
					return permanent
				}
			})
		}()
		synctest.Wait()
		// b waits for the lease and takes it when a gives it up at 1.2
		// s, then holds it until 10.4 s.
		hb, err := Hold(t.Context(), instance{tab, "b"}, "poll", HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != 1500*time.Millisecond {
			t.Errorf("b took over at %s, want at its attempt after the give-up, 1.5s", took)
		}
		time.Sleep(10400*time.Millisecond - time.Since(start))
		if err := hb.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		// a (backing off until 1.2 s + TTL = 7.2 s, then waiting) holds
		// it again at its next attempt, 10.7 s; at 11 s c takes the row
		// from a behind its back, until 12 s: a's renewal at 12.7 s is
		// refused, and a holds the lease again at once, c's having
		// expired.
		time.Sleep(11*time.Second - time.Since(start))
		tab.set(func(t *leaseTable) {
			r := t.rows["poll"]
			r.Holder, r.Token, r.Expires = "c", r.Token+1, time.Now().Add(time.Second)
		})
		if err := <-done; !errors.Is(err, permanent) {
			t.Errorf("Lead = %v, want the work's error", err)
		}
		want := []call{{0, 1}, {10700 * time.Millisecond, 3}, {12700 * time.Millisecond, 5}}
		if fmt.Sprint(calls) != fmt.Sprint(want) {
			t.Errorf("work ran at %v, want %v", calls, want)
		}
		if got := tab.rows["poll"].Holder; got != "" {
			t.Errorf("after Lead returned the lease is held by %q", got)
		}
	})
}

// Lead returns nil when its context ends, with the lease released.
func TestLeadStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		err := Lead(ctx, instance{tab, "a"}, "poll", HoldOptions{}, func(h *Held) error {
			<-h.Context().Done()
			return nil
		})
		if err != nil {
			t.Errorf("Lead = %v", err)
		}
		if got := tab.rows["poll"].Holder; got != "" {
			t.Errorf("after Lead returned the lease is held by %q", got)
		}
	})
}
