package bolt

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// checkLedgerIndex fails unless ledger_by_session holds exactly one entry
// per ledger row, under the row's session.
func checkLedgerIndex(tb testing.TB, s *Store) {
	tb.Helper()
	want, got := map[string]bool{}, map[string]bool{}
	err := s.db.View(func(tx *bbolt.Tx) error {
		rows, err := s.Cleanup(context.Background(), "")
		if err != nil {
			return err
		}
		for _, r := range rows {
			want[string(ledgerIndexKey(r.Session, ledgerKey(r.Ref)))] = true
		}
		return tx.Bucket(bucketLedgerBySes).ForEach(func(k, _ []byte) error {
			got[string(k)] = true
			return nil
		})
	})
	if err != nil {
		tb.Fatal(err)
	}
	if !maps.Equal(got, want) {
		tb.Fatalf("ledger_by_session has %d entries %q, want %d %q", len(got), slices.Sorted(maps.Keys(got)),
			len(want), slices.Sorted(maps.Keys(want)))
	}
}

func refs(rows []core.CleanupEntry) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Ref.ID
	}
	return out
}

func TestLedgerIndexFollowsRows(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})
	ref := func(id string) core.MessageRef {
		return core.MessageRef{Adapter: "fake", Place: core.Place{Chat: "c"}, ID: id}
	}
	bySession := func(session core.SessionID, want ...string) {
		t.Helper()
		rows, err := s.Cleanup(ctx, session)
		must(t, err)
		if got := refs(rows); !slices.Equal(got, want) {
			t.Errorf("Cleanup(%s) = %q, want %q", session, got, want)
		}
		checkLedgerIndex(t, s)
	}
	must(t, s.AddCleanup(ctx,
		core.CleanupEntry{Session: "a", Ref: ref("1"), Lifetime: core.LifetimeNextInput},
		core.CleanupEntry{Session: "a", Ref: ref("2"), Lifetime: core.LifetimeNextNotice},
		core.CleanupEntry{Session: "b", Ref: ref("3"), Lifetime: core.LifetimeNextNotice}))
	bySession("a", "1", "2")
	bySession("b", "3")

	// A row replaced under another session moves in the index.
	must(t, s.AddCleanup(ctx, core.CleanupEntry{Session: "b", Ref: ref("2"), Lifetime: core.LifetimeTurnComplete}))
	bySession("a", "1")
	bySession("b", "2", "3")

	// Rows appended with a message are indexed too.
	sess := createSession(t, s, core.Session{Title: "c"})
	_, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"},
		Cleanup: []core.CleanupEntry{{Ref: ref("4"), Lifetime: core.LifetimeNextInput}}})
	must(t, err)
	bySession(sess.ID, "4")

	must(t, s.RemoveCleanup(ctx, ref("3"), ref("nope")))
	bySession("b", "2")

	// Pruned rows leave the index.
	clk.Add(48 * time.Hour)
	must(t, s.AddCleanup(ctx, core.CleanupEntry{Session: "a", Ref: ref("5"), Lifetime: core.LifetimeNextInput}))
	st, err := s.Prune(ctx, PruneOptions{Before: clk.Now().Add(-24 * time.Hour)})
	must(t, err)
	if st.Ledger != 3 {
		t.Errorf("pruned %d rows, want 3", st.Ledger)
	}
	bySession("a", "5")
	bySession("b")
	bySession(sess.ID)
}

// A file of schema version 1 has no ledger_by_session: Open builds it.
func TestUpgradeFromSchema1(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, Options{})
	must(t, s.AddCleanup(ctx,
		core.CleanupEntry{Session: "a", Ref: core.MessageRef{Adapter: "fake", ID: "1"}, Lifetime: core.LifetimeNextInput},
		core.CleanupEntry{Session: "b", Ref: core.MessageRef{Adapter: "fake", ID: "2"}, Lifetime: core.LifetimeNextInput}))
	// Make it what version 1 wrote.
	must(t, s.db.Update(func(tx *bbolt.Tx) error {
		if err := tx.DeleteBucket(bucketLedgerBySes); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keySchema, []byte("1"))
	}))
	must(t, s.Close())

	s = openAt(t, path, Options{NoSync: true})
	rows, err := s.Cleanup(ctx, "a")
	must(t, err)
	if got := refs(rows); !slices.Equal(got, []string{"1"}) {
		t.Errorf("Cleanup(a) after the upgrade = %q, want [1]", got)
	}
	checkLedgerIndex(t, s)
	must(t, s.db.View(func(tx *bbolt.Tx) error {
		if v := string(tx.Bucket(bucketMeta).Get(keySchema)); v != "2" {
			t.Errorf("schema after the upgrade = %q, want 2", v)
		}
		return nil
	}))
}
