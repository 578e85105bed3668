package postgres

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// freedAgo makes the lease row name look free since ago, by the database's
// clock, as a release or an expiry that long ago leaves it.
func freedAgo(t *testing.T, s *Store, name string, ago time.Duration) {
	t.Helper()
	_, err := s.pool.Exec(context.Background(), `UPDATE leases SET holder = NULL,
	expires = clock_timestamp() - $2::bigint * interval '1 microsecond' WHERE name = $1`, name, ago.Microseconds())
	must(t, err)
}

func leaseNames(t *testing.T, s *Store) []string {
	t.Helper()
	infos, err := s.Leases(context.Background())
	must(t, err)
	var out []string
	for _, i := range infos {
		out = append(out, i.Name)
	}
	return out
}

// PruneLeases removes the rows of leases free (released or expired) for at
// least the age it is given, by the database's clock, and nothing else: a
// held lease, and one freed more recently, keep their rows. A pruned name
// can be acquired again, and the holding that had it is still fenced off.
func TestPruneLeases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b := openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b")
	var old core.Lease
	for _, name := range []string{"held", "released-long-ago", "expired-long-ago", "released-recently", "expired-recently"} {
		l, ok, err := a.AcquireLease(ctx, name, time.Minute)
		if err != nil || !ok {
			t.Fatalf("acquire %s: %v %v", name, ok, err)
		}
		if name == "released-long-ago" {
			old = l
		}
	}
	must(t, a.ReleaseLease(ctx, old))
	freedAgo(t, a, "released-long-ago", 2*time.Hour)
	freedAgo(t, a, "expired-long-ago", core.LeaseRowsKept+time.Second)
	freedAgo(t, a, "released-recently", 0)
	freedAgo(t, a, "expired-recently", core.LeaseRowsKept-time.Minute)

	n, err := b.PruneLeases(ctx, core.LeaseRowsKept)
	must(t, err)
	if got, want := leaseNames(t, a), []string{"expired-recently", "held", "released-recently"}; n != 2 || !slices.Equal(got, want) {
		t.Fatalf("pruned %d, rows left %q; want 2 pruned, %q left", n, got, want)
	}

	l, ok, err := b.AcquireLease(ctx, "released-long-ago", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire a pruned lease: %v %v", ok, err)
	}
	if err := a.SetCursorFenced(ctx, "offset", "1", old); !errors.Is(err, core.ErrLeaseLost) {
		t.Errorf("a fenced write of the pruned row's last holding: %v", err)
	}
	must(t, b.SetCursorFenced(ctx, "offset", "2", l))
	if n, err := a.PruneLeases(ctx, 0); err != nil || n != 2 {
		t.Errorf("pruning every free row: %d, %v; want the 2 freed recently", n, err)
	}
	if got, want := leaseNames(t, a), []string{"held", "released-long-ago"}; !slices.Equal(got, want) {
		t.Errorf("rows left %q, want the held ones %q", got, want)
	}
}
