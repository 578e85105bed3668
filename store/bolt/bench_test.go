package bolt

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// BenchmarkAppend measures durable appends (fsync on every commit) of a
// ~200-byte message with a unique dedup key and one event, spread over 64
// sessions, by 1, 16, 64 and 256 concurrent writers; b.N is the total number of
// appends.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16, 64, 256} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			benchAppend(b, writers)
		})
	}
}

// BenchmarkAppendWithOutbound is BenchmarkAppend at 256 writers while eight
// senders (the outbox's concurrency) run the whole journal cycle of
// outgoing messages as fast as the store lets them: an assistant message
// appended (journaled in its transaction), one operation confirmed, the
// last confirmed (the row removed). It reports inbound appends/s, outbound
// messages/s, and the confirmation's latency — the window in which a crash
// would repeat a send — at the median and the 99th percentile.
func BenchmarkAppendWithOutbound(b *testing.B) {
	benchAppendLoaded(b, 256, 8)
}

func benchAppend(b *testing.B, writers int) { benchAppendLoaded(b, writers, 0) }

// outboundLoad runs senders journal cycles until stop closes and returns
// how many messages went through and each confirmation's latency.
func outboundLoad(b *testing.B, s *Store, session core.SessionID, senders int, stop <-chan struct{}) (n *atomic.Int64, lat func() []time.Duration) {
	ctx := context.Background()
	n = new(atomic.Int64)
	var mu sync.Mutex
	var lats []time.Duration
	var wg sync.WaitGroup
	for range senders {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				res, err := s.Append(ctx, core.Append{
					Message: core.Message{Session: session, Role: core.RoleAssistant, Origin: core.OriginMCP, Content: "an answer"},
					Events:  []core.Event{{Kind: core.EventAssistant, Message: &core.Message{}}},
				})
				if err != nil {
					b.Error(err)
					return
				}
				seq := res.Events[0].Seq
				start := time.Now()
				if err := s.ConfirmDelivery(ctx, seq, "telegram/msg/0", false); err != nil {
					b.Error(err)
					return
				}
				d := time.Since(start)
				if err := s.ConfirmDelivery(ctx, seq, "slack/msg/0", true); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lats = append(lats, d)
				mu.Unlock()
				n.Add(1)
			}
		})
	}
	return n, func() []time.Duration {
		wg.Wait()
		slices.Sort(lats)
		return lats
	}
}

func benchAppendLoaded(b *testing.B, writers, senders int) {
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
	stop := make(chan struct{})
	var out *atomic.Int64
	var lats func() []time.Duration
	if senders > 0 {
		out, lats = outboundLoad(b, s, sessions[0], senders, stop)
	}
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
	if senders > 0 {
		close(stop)
		l := lats()
		b.ReportMetric(float64(out.Load())/b.Elapsed().Seconds(), "outbound/s")
		if len(l) > 0 {
			b.ReportMetric(float64(l[len(l)/2].Microseconds()), "confirm-p50-µs")
			b.ReportMetric(float64(l[len(l)*99/100].Microseconds()), "confirm-p99-µs")
		}
	}
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

// BenchmarkConfirmDelivery measures one sender's journal cycle with nothing
// else writing: append an assistant message, confirm its one operation as
// the last. The confirmation's latency (reported at p50 and p99) is the
// window in which a crash repeats a send on an idle daemon.
func BenchmarkConfirmDelivery(b *testing.B) {
	ctx := context.Background()
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sess, _, err := s.CreateSession(ctx, core.Session{Title: "confirm"})
	if err != nil {
		b.Fatal(err)
	}
	lats := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		res, err := s.Append(ctx, core.Append{
			Message: core.Message{Session: sess.ID, Role: core.RoleAssistant, Origin: core.OriginMCP, Content: "an answer"},
			Events:  []core.Event{{Kind: core.EventAssistant, Message: &core.Message{}}},
		})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := s.ConfirmDelivery(ctx, res.Events[0].Seq, "telegram/msg/0", true); err != nil {
			b.Fatal(err)
		}
		lats = append(lats, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lats)
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds()), "confirm-p50-µs")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds()), "confirm-p99-µs")
}
