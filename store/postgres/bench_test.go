package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// BenchmarkAppend measures durable appends (fsync on, synchronous_commit
// on: acknowledged means on disk) of a ~200-byte message with a unique
// dedup key and one event, spread over 64 sessions, by 1 and 64 concurrent
// writers on one instance and by 64 writers spread over three instances
// (three Stores, each with its own pool and committer, as three parley
// processes); b.N is the total number of appends. store/bolt's
// BenchmarkAppend is the same load on bbolt.
func BenchmarkAppend(b *testing.B) {
	for _, c := range []struct{ writers, instances int }{{1, 1}, {64, 1}, {64, 3}} {
		b.Run(fmt.Sprintf("writers=%d/instances=%d", c.writers, c.instances), func(b *testing.B) {
			benchAppend(b, c.writers, c.instances)
		})
	}
}

func benchAppend(b *testing.B, writers, instances int) {
	ctx := context.Background()
	srv := pgtest.StartDurable(b)
	stores := make([]*Store, instances)
	for i := range stores {
		s, err := Open(ctx, srv.URL, Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	sessions := make([]core.SessionID, 64)
	for i := range sessions {
		sess, _, err := stores[0].CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)})
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = sess.ID
	}
	content := strings.Repeat("lorem ipsum ", 17)[:200]
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				_, err := s.Append(ctx, core.Append{
					Message: core.Message{
						Session: sessions[i%int64(len(sessions))],
						Role:    core.RoleUser,
						Actor:   core.Actor{ID: "12345", Name: "Ada"},
						Origin:  "telegram",
						Mime:    core.MimeMarkdown,
						Content: content,
					},
					DedupKey: "telegram/" + strconv.FormatInt(i, 10),
					Events:   []core.Event{{Kind: core.EventHumanMessage, Origin: "telegram", Message: &core.Message{}}},
				})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}
