package bolt

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// BenchmarkPrune prunes 100,000 dedup keys and 100,000 cleanup-ledger rows,
// all past the retention, while a writer keeps appending messages: one op
// is the whole prune. It reports the appends' worst and 99th-percentile
// latency during the prune, which the batches bound (one transaction of
// DefaultPruneBatch deletions at a time), and how many appends went
// through. The store syncs every commit, as the daemon's does.
//
//	go test ./store/bolt -run '^$' -bench BenchmarkPrune -benchtime 3x
func BenchmarkPrune(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(b, Options{Now: clk.Now})
	s.db.NoSync = false
	sess := createSession(b, s, core.Session{Title: "live"})
	old := clk.Now().Add(-60 * 24 * time.Hour)
	var lats []time.Duration
	var appended int
	for b.Loop() {
		b.StopTimer()
		fillPrunable(b, s, n, old)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				_, err := s.Append(ctx, core.Append{DedupKey: fmt.Sprint("live-", appended), Message: core.Message{
					Session: sess.ID, Role: core.RoleUser, Content: "a person writes while the pruner runs"}})
				if err != nil {
					b.Error(err)
					return
				}
				lats = append(lats, time.Since(start))
				appended++
			}
		})
		b.StartTimer()
		st, err := s.Prune(ctx, PruneOptions{Before: clk.Now().Add(-30 * 24 * time.Hour)})
		b.StopTimer()
		close(stop)
		wg.Wait()
		if err != nil || st.Dedup != n || st.Ledger != n {
			b.Fatalf("Prune = %+v, %v; want %d of each", st, err, n)
		}
		b.StartTimer()
	}
	slices.Sort(lats)
	if len(lats) > 0 {
		b.ReportMetric(float64(lats[len(lats)-1].Microseconds())/1000, "append-max-ms")
		b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, "append-p99-ms")
		b.ReportMetric(float64(appended)/float64(b.N), "appends/op")
	}
}

// fillPrunable writes n dedup keys pointing at messages made at old and n
// cleanup rows created at old, a thousand per transaction.
func fillPrunable(tb testing.TB, s *Store, n int, old time.Time) {
	tb.Helper()
	for lo := 0; lo < n; lo += 1000 {
		var rows []core.CleanupEntry
		for i := lo; i < lo+1000; i++ {
			rows = append(rows, core.CleanupEntry{Session: core.SessionID(fmt.Sprint("s", i%5000)),
				Ref:      core.MessageRef{Adapter: "telegram", Place: core.Place{Chat: "-1001234567890", Thread: fmt.Sprint(i % 5000)}, ID: fmt.Sprint(old.UnixNano(), i)},
				Lifetime: core.LifetimeNextInput, Others: true, Created: old})
		}
		prepared, err := prepareCleanup(old, "", rows)
		if err != nil {
			tb.Fatal(err)
		}
		id := idAt(old)
		err = s.update(context.Background(), func(w *wtx) error {
			for i := lo; i < lo+1000; i++ {
				if err := w.Bucket(bucketDedup).Put([]byte(fmt.Sprint("telegram\x00", old.UnixNano(), "-", i)), []byte(id)); err != nil {
					return err
				}
			}
			return putCleanup(w.Tx, prepared)
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
}
