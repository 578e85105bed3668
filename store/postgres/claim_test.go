package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// journalEvents appends n journaled events and returns their seqs.
func journalEvents(t *testing.T, s *Store, n int) []uint64 {
	t.Helper()
	evs := make([]core.Event, n)
	for i := range evs {
		evs[i] = core.Event{Kind: core.EventTurnComplete, Session: "s", Turn: uint64(i)}
	}
	out, err := s.AppendEvents(context.Background(), evs...)
	if err != nil {
		t.Fatal(err)
	}
	seqs := make([]uint64, len(out))
	for i, e := range out {
		seqs[i] = e.Seq
	}
	return seqs
}

// Two instances claiming the same journaled events one by one, at once,
// each in its own order: every event is granted to exactly one of them.
func TestClaimDeliveryExactlyOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	seqs := journalEvents(t, a, 200)
	granted := map[string][]uint64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, st := range []*Store{a, b} {
		name := fmt.Sprintf("instance-%d", i)
		order := slices.Clone(seqs)
		if i == 1 {
			slices.Reverse(order) // they meet in the middle, and race there
		}
		wg.Go(func() {
			for _, seq := range order {
				ok, err := st.ClaimDelivery(ctx, seq, core.InstanceID(name), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					granted[name] = append(granted[name], seq)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	checkPartition(t, seqs, granted)
	t.Logf("granted: %d and %d", len(granted["instance-0"]), len(granted["instance-1"]))
	// The holder claiming again renews; the other is still refused.
	holder, other := "instance-0", "instance-1"
	if !slices.Contains(granted[holder], seqs[1]) {
		holder, other = other, holder
	}
	if ok, err := a.ClaimDelivery(ctx, seqs[1], core.InstanceID(holder), time.Minute); !ok || err != nil {
		t.Errorf("the holder's second claim: %v, %v; want granted", ok, err)
	}
	if ok, err := b.ClaimDelivery(ctx, seqs[1], core.InstanceID(other), time.Minute); ok || err != nil {
		t.Errorf("the other's claim on a held event: %v, %v; want refused", ok, err)
	}
	// An event no longer journaled is granted to nobody.
	storetest.Must(t, a.ConfirmDelivery(ctx, seqs[0], "", true))
	if ok, err := b.ClaimDelivery(ctx, seqs[0], "instance-1", time.Minute); ok || err != nil {
		t.Errorf("claim on a finished event: %v, %v; want refused", ok, err)
	}
}

// Two instances claiming pages of the journal at once (the start-up replay,
// the scan for abandoned claims) split it between them: every event goes to
// exactly one, none is left out, and neither waits for the other's locks.
func TestClaimDeliveriesSplit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	seqs := journalEvents(t, a, 500)
	last := seqs[len(seqs)-1]
	granted := map[string][]uint64{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, st := range []*Store{a, b} {
		name := fmt.Sprintf("instance-%d", i)
		wg.Go(func() {
			var after uint64
			for {
				page, err := st.ClaimDeliveries(ctx, after, last, 16, core.InstanceID(name), time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, d := range page {
					granted[name] = append(granted[name], d.Event.Seq)
				}
				mu.Unlock()
				if len(page) < 16 {
					return
				}
				after = page[len(page)-1].Event.Seq
			}
		})
	}
	wg.Wait()
	// A page may end short where the other instance had the rest locked;
	// what is left unclaimed is then claimed by a later scan.
	for _, name := range []string{"instance-0", "instance-1"} {
		st := map[string]*Store{"instance-0": a, "instance-1": b}[name]
		page, err := st.ClaimDeliveries(ctx, 0, last, 0, core.InstanceID(name), time.Minute)
		storetest.Must(t, err)
		mu.Lock()
		for _, d := range page {
			if !slices.Contains(granted[name], d.Event.Seq) {
				granted[name] = append(granted[name], d.Event.Seq)
			}
		}
		mu.Unlock()
	}
	checkPartition(t, seqs, granted)
	t.Logf("split %d events: %d and %d", len(seqs), len(granted["instance-0"]), len(granted["instance-1"]))
	// upTo bounds a page.
	if page, err := a.ClaimDeliveries(ctx, 0, seqs[2], 0, "instance-0", time.Minute); err != nil || len(page) > 3 {
		t.Errorf("ClaimDeliveries up to the third event: %d events, %v", len(page), err)
	}
}

// checkPartition fails unless every seq was granted to exactly one instance.
func checkPartition(t *testing.T, seqs []uint64, granted map[string][]uint64) {
	t.Helper()
	owner := map[uint64]string{}
	for name, got := range granted {
		for _, seq := range got {
			if prev, dup := owner[seq]; dup {
				t.Errorf("event %d granted to %s and %s", seq, prev, name)
			}
			owner[seq] = name
		}
	}
	for _, seq := range seqs {
		if owner[seq] == "" {
			t.Errorf("event %d granted to nobody", seq)
		}
	}
}

// A holder that stops (its connections closed) keeps its claims until they
// expire by the database's clock; then the other instance takes them, with
// the holder's confirmations. A confirmation the stale holder makes after
// that is accepted (it records what the platform took, whoever sent it),
// and its renewal reports the claim gone.
func TestClaimExpiresWithItsHolder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	seqs := journalEvents(t, a, 2)
	const ttl = time.Second
	// Claimed for a minute first, so that b's attempt meets them held
	// however slowly this runs.
	for _, seq := range seqs {
		if ok, err := a.ClaimDelivery(ctx, seq, "a", time.Minute); !ok || err != nil {
			t.Fatalf("claim %d: %v, %v", seq, ok, err)
		}
	}
	storetest.Must(t, a.ConfirmDelivery(ctx, seqs[0], "telegram/msg/0", false))
	if page, err := b.ClaimDeliveries(ctx, 0, seqs[1], 0, "b", ttl); len(page) != 0 || err != nil {
		t.Fatalf("b took %d events held by a (%v)", len(page), err)
	}
	// a's last renewal is for ttl: the claims expire no sooner than ttl
	// after this, by the database's clock (on this machine, the same
	// clock).
	claimed := time.Now()
	if held, err := a.RenewClaims(ctx, "a", seqs, ttl); len(held) != len(seqs) || err != nil {
		t.Fatalf("a's renewal: %v, %v; want both held", held, err)
	}
	storetest.Must(t, a.Close())
	// One claim may expire a moment before the other: b takes each as it
	// does.
	var page []core.Delivery
	deadline := time.After(10 * time.Second)
	for len(page) < 2 {
		more, err := b.ClaimDeliveries(ctx, 0, seqs[1], 0, "b", time.Minute)
		storetest.Must(t, err)
		if len(page) == 0 && len(more) > 0 && time.Since(claimed) < ttl {
			t.Fatalf("b took %+v %v after a claimed it for %v", more, time.Since(claimed), ttl)
		}
		page = append(page, more...)
		if len(page) >= 2 {
			break
		}
		select {
		case <-deadline:
			t.Fatal("a's claims did not expire within 10 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
	took := time.Since(claimed)
	t.Logf("taken over %v after the claims were made (ttl %v)", took.Round(time.Millisecond), ttl)
	if len(page) != 2 || page[0].Event.Seq != seqs[0] || !slices.Equal(page[0].Done, []string{"telegram/msg/0"}) {
		t.Fatalf("b took %+v; want both events, the first with a's confirmation", page)
	}
	// The stale holder, back on a new connection, finds out at its next
	// renewal; what it confirms meanwhile is kept, and finishing an event
	// b finished is no error.
	stale := openURL(t, srv.URL, storetest.Options{})
	if held, err := stale.RenewClaims(ctx, "a", seqs, ttl); len(held) != 0 || err != nil {
		t.Errorf("a's renewal after b took over: %v, %v; want nothing held", held, err)
	}
	if ok, err := stale.ClaimDelivery(ctx, seqs[0], "a", ttl); ok || err != nil {
		t.Errorf("a's claim on b's event: %v, %v; want refused", ok, err)
	}
	storetest.Must(t, stale.ConfirmDelivery(ctx, seqs[0], "slack/msg/0", false))
	ds, err := b.Deliveries(ctx, 0, 0)
	storetest.Must(t, err)
	if !slices.Equal(ds[0].Done, []string{"slack/msg/0", "telegram/msg/0"}) {
		t.Errorf("confirmations %v; want the stale holder's kept", ds[0].Done)
	}
	storetest.Must(t, b.ConfirmDelivery(ctx, seqs[0], "", true))
	storetest.Must(t, stale.ConfirmDelivery(ctx, seqs[0], "", true))
	if held, err := b.RenewClaims(ctx, "b", seqs, time.Minute); !slices.Equal(held, seqs[1:]) || err != nil {
		t.Errorf("b renews %v (%v); want the event it still holds, %v", held, err, seqs[1:])
	}
}

// A holder that stops cleanly releases its claims: the other instance takes
// them at once instead of at expiry. A release does not touch others'
// claims.
func TestReleaseClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	seqs := journalEvents(t, a, 3)
	for i, seq := range seqs {
		name := map[bool]core.InstanceID{true: "a", false: "b"}[i < 2]
		st := map[bool]*Store{true: a, false: b}[i < 2]
		if ok, err := st.ClaimDelivery(ctx, seq, name, time.Hour); !ok || err != nil {
			t.Fatalf("claim %d: %v, %v", seq, ok, err)
		}
	}
	storetest.Must(t, a.ReleaseClaims(ctx, "a", seqs))
	page, err := b.ClaimDeliveries(ctx, 0, seqs[2], 0, "b", time.Hour)
	storetest.Must(t, err)
	got := make([]uint64, len(page))
	for i, d := range page {
		got[i] = d.Event.Seq
	}
	if !slices.Equal(got, seqs[:2]) {
		t.Errorf("b claimed %v after a released; want the two released, %v (the third it holds already)", got, seqs[:2])
	}
}

// A database of schema version 2 (leases, no claims) gains the claim
// columns on open; the events it journaled are unclaimed and claimable.
func TestClaimsMigrateFromVersion2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	seqs := journalEvents(t, s, 2)
	_, err := s.pool.Exec(ctx, `ALTER TABLE journal DROP COLUMN claimed_by, DROP COLUMN claim_until;
		DROP FUNCTION parley_pace_take; DROP TABLE pace;
		UPDATE schema_version SET version = 2`)
	storetest.Must(t, err)
	storetest.Must(t, s.Close())
	s = openURL(t, srv.URL, storetest.Options{})
	page, err := s.ClaimDeliveries(ctx, 0, seqs[1], 0, "a", time.Minute)
	if err != nil || len(page) != 2 {
		t.Fatalf("after migrating: claimed %d events (%v), want 2", len(page), err)
	}
	storetest.Must(t, s.Check(ctx))
}

// BenchmarkClaimDelivery measures what claiming adds to the delivery of a
// journaled event: one claim each, by one instance.
func BenchmarkClaimDelivery(b *testing.B) {
	ctx := context.Background()
	srv := pgtest.StartDurable(b)
	s, err := Open(ctx, srv.URL, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	evs := make([]core.Event, b.N)
	for i := range evs {
		evs[i] = core.Event{Kind: core.EventTurnComplete, Session: "s"}
	}
	evs, err = s.AppendEvents(ctx, evs...)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if ok, err := s.ClaimDelivery(ctx, evs[i].Seq, "a", time.Minute); !ok || err != nil {
			b.Fatalf("claim: %v, %v", ok, err)
		}
	}
}

// A confirmation racing the last one of the same event (one instance's
// operation answered while its event is being sealed, or two instances
// after a takeover) is no error: the event is finished either way.
func TestConfirmRacingTheLastIsNoError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	seqs := journalEvents(t, a, 300)
	var wg sync.WaitGroup
	for _, seq := range seqs {
		wg.Go(func() {
			if err := a.ConfirmDelivery(ctx, seq, "fake/msg/0", false); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := b.ConfirmDelivery(ctx, seq, "", true); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if ds, err := a.Deliveries(ctx, 0, 0); len(ds) != 0 || err != nil {
		t.Errorf("%d events left journaled (%v), want none", len(ds), err)
	}
}
