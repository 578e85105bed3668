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

// dueRows are n ledger rows of session s, due or not.
func dueRows(s core.SessionID, n int, due bool) []core.CleanupEntry {
	out := make([]core.CleanupEntry, n)
	for i := range out {
		out[i] = core.CleanupEntry{Session: s, Lifetime: core.LifetimeNextNotice, Due: due,
			Ref: core.MessageRef{Adapter: "telegram", Place: core.Place{Chat: "-100", Thread: string(s)}, ID: fmt.Sprint(i)}}
	}
	return out
}

func refIDs(refs []core.MessageRef) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = r.Place.Thread + "/" + r.ID
	}
	slices.Sort(out)
	return out
}

func entryIDs(rows []core.CleanupEntry) []string {
	refs := make([]core.MessageRef, len(rows))
	for i, r := range rows {
		refs[i] = r.Ref
	}
	return refIDs(refs)
}

// Two instances scanning one ledger at once take disjoint sets of its due
// rows, together all of them; rows not due and rows an instance marked
// due (and so holds) are never taken by a scan.
func TestClaimPendingCleanupDisjoint(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	storetest.Must(t, a.AddCleanup(ctx, dueRows("due", 600, true)...))
	storetest.Must(t, a.AddCleanup(ctx, dueRows("waiting", 50, false)...))
	held, err := a.ClaimDueCleanup(ctx, "a", time.Hour, dueRows("marked", 20, false)...)
	storetest.Must(t, err)
	if len(held) != 20 {
		t.Fatalf("a marked 20 rows due and holds %d", len(held))
	}
	taken := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, st := range map[string]*Store{"a": a, "b": b} {
		wg.Go(func() {
			for {
				rows, err := st.ClaimPendingCleanup(ctx, name, 50, time.Hour)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				taken[name] = append(taken[name], entryIDs(rows)...)
				mu.Unlock()
				if len(rows) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	all := append(slices.Clone(taken["a"]), taken["b"]...)
	slices.Sort(all)
	if want := entryIDs(dueRows("due", 600, true)); !slices.Equal(all, want) {
		t.Errorf("the two scans took %d rows (%d distinct); want each of the 600 due rows once", len(all), len(slices.Compact(slices.Clone(all))))
	}
	t.Logf("a took %d, b took %d", len(taken["a"]), len(taken["b"]))
	rows, err := a.Cleanup(ctx, "")
	storetest.Must(t, err)
	if len(rows) != 670 {
		t.Errorf("the ledger holds %d rows, want 670: claiming removes none", len(rows))
	}
}

// A row another instance holds is not granted to a second instance marking
// it due, nor to its scan; once the claim expires (by the database clock)
// the scan takes it over, and the first holder's renewal says it lost it.
func TestCleanupClaimTakeoverAfterExpiry(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	rows := dueRows("s", 2, false)
	// Held for an hour first, so that b's attempts meet the row held
	// however slowly this runs; then a's last renewal, for 300 ms.
	got, err := a.ClaimDueCleanup(ctx, "a", time.Hour, rows[0])
	storetest.Must(t, err)
	if len(got) != 1 {
		t.Fatalf("a holds %v after marking its row due", got)
	}
	got, err = b.ClaimDueCleanup(ctx, "b", time.Hour, rows...)
	storetest.Must(t, err)
	if want := refIDs([]core.MessageRef{rows[1].Ref}); !slices.Equal(refIDs(got), want) {
		t.Errorf("b marked both due and holds %v; want only the one a does not hold, %v", refIDs(got), want)
	}
	if page, err := b.ClaimPendingCleanup(ctx, "b", 0, time.Hour); err != nil || len(page) != 0 {
		t.Errorf("b's scan while a holds its row took %v (%v); want nothing", entryIDs(page), err)
	}
	if held, err := a.RenewCleanupClaims(ctx, "a", []core.MessageRef{rows[0].Ref}, 300*time.Millisecond); err != nil || len(held) != 1 {
		t.Fatalf("a renews %v (%v); want its row", refIDs(held), err)
	}
	var page []core.CleanupEntry
	deadline := time.Now().Add(10 * time.Second)
	for len(page) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a's expired claim was never taken over")
		}
		page, err = b.ClaimPendingCleanup(ctx, "b", 0, time.Hour)
		storetest.Must(t, err)
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	if want := refIDs([]core.MessageRef{rows[0].Ref}); !slices.Equal(entryIDs(page), want) || !page[0].Due {
		t.Errorf("b took over %+v; want a's row, due", page)
	}
	if held, err := a.RenewCleanupClaims(ctx, "a", []core.MessageRef{rows[0].Ref}, time.Hour); err != nil || len(held) != 0 {
		t.Errorf("a renews %v (%v) after b took its row over; want nothing", refIDs(held), err)
	}
	if held, err := b.RenewCleanupClaims(ctx, "b", []core.MessageRef{rows[0].Ref, rows[1].Ref}, time.Hour); err != nil || len(held) != 2 {
		t.Errorf("b renews %v (%v); want both rows it holds", refIDs(held), err)
	}
}

// A clean stop releases: the other instance's scan takes the rows at once.
// A release leaves others' claims alone, and removing a held row (the
// message is deleted) needs no claim.
func TestReleaseCleanupClaims(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openURL(t, srv.URL, storetest.Options{}), openURL(t, srv.URL, storetest.Options{})
	rows := dueRows("s", 3, false)
	_, err := a.ClaimDueCleanup(ctx, "a", time.Hour, rows[:2]...)
	storetest.Must(t, err)
	_, err = b.ClaimDueCleanup(ctx, "b", time.Hour, rows[2])
	storetest.Must(t, err)
	all := []core.MessageRef{rows[0].Ref, rows[1].Ref, rows[2].Ref}
	storetest.Must(t, a.ReleaseCleanupClaims(ctx, "a", all))
	page, err := b.ClaimPendingCleanup(ctx, "b", 0, time.Hour)
	storetest.Must(t, err)
	if want := refIDs(all[:2]); !slices.Equal(entryIDs(page), want) {
		t.Errorf("b took %v after a released; want the two released, %v", entryIDs(page), want)
	}
	if held, err := b.RenewCleanupClaims(ctx, "b", all, time.Hour); err != nil || len(held) != 3 {
		t.Errorf("b renews %v (%v); want all three", refIDs(held), err)
	}
	storetest.Must(t, a.RemoveCleanup(ctx, all...))
	if left, err := b.Cleanup(ctx, ""); err != nil || len(left) != 0 {
		t.Errorf("after removal the ledger holds %v (%v)", left, err)
	}
}

// A database of schema version 4 (journal claims and shared pacing, no
// ledger claims) gains
// the ledger's columns on open; its due rows are found due and claimable,
// the others not.
func TestCleanupClaimsMigrateFromVersion4(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	storetest.Must(t, s.AddCleanup(ctx, dueRows("due", 3, true)...))
	storetest.Must(t, s.AddCleanup(ctx, dueRows("waiting", 2, false)...))
	_, err := s.pool.Exec(ctx, `DROP INDEX ledger_due;
		ALTER TABLE ledger DROP COLUMN due, DROP COLUMN claimed_by, DROP COLUMN claim_until;
		UPDATE schema_version SET version = 4`)
	storetest.Must(t, err)
	storetest.Must(t, s.Close())
	s = openURL(t, srv.URL, storetest.Options{})
	page, err := s.ClaimPendingCleanup(ctx, "a", 0, time.Minute)
	storetest.Must(t, err)
	if want := entryIDs(dueRows("due", 3, true)); !slices.Equal(entryIDs(page), want) {
		t.Errorf("after migrating: claimed %v, want the due rows %v", entryIDs(page), want)
	}
	storetest.Must(t, s.Check(ctx))
}
