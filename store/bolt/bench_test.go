package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// BenchmarkAppend measures durable appends (fsync on every commit) of a
// ~200-byte message with a unique dedup key and one event, spread over 64
// sessions, by 1, 16 and 256 concurrent writers; b.N is the total number of
// appends.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchAppend(b, writers)
		})
	}
}

func benchAppend(b *testing.B, writers int) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sessions := make([]core.SessionID, 64)
	for i := range sessions {
		sess, _, err := s.CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)})
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
	for range writers {
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

// BenchmarkCommitGroup measures what the committer alone spends per append:
// groups of 128 prepared appends over 64 sessions applied and committed in
// one transaction, without fsync. This serial part bounds the throughput
// BenchmarkAppend can reach however many writers there are.
func BenchmarkCommitGroup(b *testing.B) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sessions := make([]core.SessionID, 64)
	for i := range sessions {
		sess, _, err := s.CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)})
		if err != nil {
			b.Fatal(err)
		}
		sessions[i] = sess.ID
	}
	content := strings.Repeat("lorem ipsum ", 17)[:200]
	ops := make([]*appendOp, 128)
	b.ReportAllocs()
	b.ResetTimer()
	for n := 0; n < b.N; n += len(ops) {
		b.StopTimer()
		for j := range ops {
			i := n + j
			ops[j], err = prepareAppend(s.clock(), core.Append{
				Message: core.Message{
					Session: sessions[i%len(sessions)], Role: core.RoleUser, Origin: "telegram",
					Mime: core.MimeMarkdown, Content: content,
				},
				DedupKey: "telegram/" + strconv.Itoa(i),
				Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		err := s.db.Update(func(tx *bbolt.Tx) error {
			w := s.newWtx(tx)
			for _, op := range ops {
				if err := op.apply(w); err != nil {
					return err
				}
			}
			return w.finish()
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
