package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// BenchmarkSessionsPage lists sessions from a store of 100,000, each bound
// to a platform place and carrying a finished turn's output, one in a
// hundred closed: the first page of 100 (what GET /api/sessions answers by
// default), a page of closed sessions (a filter that skips 99 of 100), a
// page deep in the list (by cursor), and, for comparison, every session at
// once (core.Store.Sessions, what the list answered before pages).
//
//	go test ./store/bolt -run '^$' -bench BenchmarkSessionsPage -benchmem
func BenchmarkSessionsPage(b *testing.B) {
	const n = 100_000
	s, _ := openTemp(b, Options{})
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ids := make([]core.SessionID, n)
	// Written in batches of 1,000 per transaction: 100,000 single
	// creations would make the set-up the benchmark.
	for lo := 0; lo < n; lo += 1000 {
		type kv struct {
			k core.SessionID
			v []byte
		}
		batch := make([]kv, 0, 1000)
		for i := lo; i < lo+1000; i++ {
			at := start.Add(time.Duration(i) * time.Second)
			id := core.SessionID(core.EncodeID(uint64(at.UnixMilli()), [10]byte{byte(i)}))
			ids[i] = id
			st := core.StatusIdle
			if i%100 == 0 {
				st = core.StatusClosed
			}
			sess := core.Session{ID: id, Title: fmt.Sprintf("Session %d: fix the build", i), Status: st,
				Created: at, Updated: at, Turn: 3, LastInputOrigin: "telegram",
				Output: "Done: the build is green again.",
				Bindings: map[core.AdapterName]core.Binding{"telegram": {Adapter: "telegram",
					Place:  core.Place{Chat: "-1001234567890", Thread: fmt.Sprint(i)},
					Output: core.OutputState{Ref: core.MessageRef{Adapter: "telegram", ID: fmt.Sprint(i * 7)}, Digest: "9f86d081884c7d65", Turn: 3},
					Shown:  core.StatusView{Title: fmt.Sprintf("Session %d: fix the build", i), Status: st}}}}
			v, err := json.Marshal(sess)
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, kv{id, v})
		}
		err := s.update(ctx, func(w *wtx) error {
			for _, e := range batch {
				if err := w.Bucket(bucketSessions).Put([]byte(e.k), e.v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	page := func(q core.SessionQuery, want int) func(*testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				got, _, err := s.SessionsPage(ctx, q)
				if err != nil || len(got) != want {
					b.Fatalf("%d sessions, %v; want %d", len(got), err, want)
				}
			}
		}
	}
	b.Run("first-100", page(core.SessionQuery{Limit: 100}, 100))
	b.Run("closed-100", page(core.SessionQuery{Limit: 100, Status: core.StatusClosed}, 100))
	b.Run("deep-100", page(core.SessionQuery{Limit: 100, After: ids[n/2]}, 100))
	b.Run("first-1000", page(core.SessionQuery{Limit: 1000}, 1000))
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			got, err := s.Sessions(ctx)
			if err != nil || len(got) != n {
				b.Fatalf("%d sessions, %v", len(got), err)
			}
		}
	})
}
