package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// Shared pacing on a real PostgreSQL: three instances (three stores, each
// with its own pool) take from one budget at once, and the times the
// ledger recorded — one clock, the database's — never hold more than N in
// any window of Per.
func TestPaceSharedWindowNeverOverspent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	stores := []*Store{openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b"), openInstance(t, srv.URL, "c")}
	rate := core.Rate{N: 5, Per: 500 * time.Millisecond}
	const goal = 4 * 5 // four windows' worth: the budget renews under contention
	windows := []core.PaceWindow{{Key: "g\x00telegram\x00-100123\x000", Rate: rate}}
	var mu sync.Mutex
	var taken []time.Time
	var refusals atomic.Int64
	var wg sync.WaitGroup
	for i := range 9 {
		s := stores[i%len(stores)]
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(taken) >= goal
				mu.Unlock()
				if done {
					return
				}
				take, err := s.TakePace(ctx, windows, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if take.Taken() {
					mu.Lock()
					taken = append(taken, take.At)
					mu.Unlock()
					continue
				}
				refusals.Add(1)
				if len(take.Holds) != 1 || take.Holds[0].Key != windows[0].Key || take.Holds[0].Wait <= 0 || take.Holds[0].Wait > rate.Per {
					t.Errorf("refused with %+v, want one hold of the window, within its Per", take.Holds)
					return
				}
				time.Sleep(take.Holds[0].Wait)
			}
		})
	}
	wg.Wait()
	slices.SortFunc(taken, time.Time.Compare)
	for i := rate.N; i < len(taken); i++ {
		if d := taken[i].Sub(taken[i-rate.N]); d < rate.Per {
			t.Errorf("slots %d and %d were taken %s apart: %d in a window of %s", i-rate.N, i, d, rate.N+1, rate.Per)
		}
	}
	t.Logf("%d slots taken by 9 takers over 3 instances in %s, %d refusals", len(taken), taken[len(taken)-1].Sub(taken[0]), refusals.Load())
}

// A take counts in several windows at once, all or none: a full one
// refuses it and the others are left as they were.
func TestPaceTakeIsAllOrNone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	conv := core.PaceWindow{Key: "conversation", Rate: core.Rate{N: 1, Per: time.Hour}}
	group := core.PaceWindow{Key: "group", Rate: core.Rate{N: 2, Per: time.Hour}}
	take, err := s.TakePace(ctx, []core.PaceWindow{conv, group}, nil)
	if err != nil || !take.Taken() || take.At.IsZero() {
		t.Fatalf("first take: %+v, %v", take, err)
	}
	take, err = s.TakePace(ctx, []core.PaceWindow{group, conv}, nil)
	if err != nil || take.Taken() || len(take.Holds) != 1 || take.Holds[0].Key != "conversation" {
		t.Fatalf("second take: %+v, %v; want refused by the conversation alone", take, err)
	}
	if w := take.Holds[0].Wait; w <= 59*time.Minute || w > time.Hour {
		t.Errorf("the conversation holds for %s, want just under an hour", w)
	}
	// The refused take left the group's second slot free.
	if take, err = s.TakePace(ctx, []core.PaceWindow{group}, nil); err != nil || !take.Taken() {
		t.Fatalf("the group's second slot: %+v, %v", take, err)
	}
	if take, err = s.TakePace(ctx, []core.PaceWindow{group}, nil); err != nil || take.Taken() {
		t.Fatalf("a third slot of two: %+v, %v", take, err)
	}
	// Keys are bytes: the scope keys of core/delivery hold NUL.
	odd := core.PaceWindow{Key: "a\x00\xff\x00b", Rate: core.Rate{N: 1, Per: time.Hour}}
	if take, err = s.TakePace(ctx, []core.PaceWindow{odd}, nil); err != nil || !take.Taken() {
		t.Fatalf("a key with NUL: %+v, %v", take, err)
	}
	if take, err = s.TakePace(ctx, []core.PaceWindow{odd}, []string{"\x00never paused"}); err != nil || take.Taken() || take.Holds[0].Key != odd.Key {
		t.Fatalf("the same key again: %+v, %v", take, err)
	}
	// Nothing to take and no pause on: granted.
	if take, err = s.TakePace(ctx, nil, []string{"p"}); err != nil || !take.Taken() {
		t.Fatalf("no windows: %+v, %v", take, err)
	}
}

// A pause written by one instance (its 429) holds back the takes of the
// others until it ends; a shorter pause written later does not shorten it.
func TestPaceSharedPause(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	a, b, c := openInstance(t, srv.URL, "a"), openInstance(t, srv.URL, "b"), openInstance(t, srv.URL, "c")
	key := "g\x00telegram\x00-100123"
	window := []core.PaceWindow{{Key: key + "\x000", Rate: core.Rate{N: 20, Per: time.Minute}}}
	storetest.Must(t, a.PausePace(ctx, []string{key, key}, 700*time.Millisecond))
	storetest.Must(t, a.PausePace(ctx, []string{key}, time.Millisecond))
	for _, s := range []*Store{b, c, a} {
		take, err := s.TakePace(ctx, window, []string{"elsewhere", key})
		if err != nil || take.Taken() || len(take.Holds) != 1 || take.Holds[0].Key != key {
			t.Fatalf("%s: %+v, %v; want held by the pause", s.instance, take, err)
		}
		if w := take.Holds[0].Wait; w <= 0 || w > 700*time.Millisecond {
			t.Errorf("%s waits %s, want within the 700ms pause", s.instance, w)
		}
	}
	take, err := b.TakePace(ctx, window, []string{key})
	storetest.Must(t, err)
	time.Sleep(take.Holds[0].Wait)
	if take, err = b.TakePace(ctx, window, []string{key}); err != nil || !take.Taken() {
		t.Fatalf("after the pause: %+v, %v", take, err)
	}
}

// Rows whose window and pause are over are pruned by a take, about once a
// minute; rows still counting are kept.
func TestPacePrunesIdleRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	short := core.Rate{N: 1, Per: time.Millisecond}
	for i := range 50 {
		_, err := s.TakePace(ctx, []core.PaceWindow{{Key: fmt.Sprint("idle ", i), Rate: short}}, nil)
		storetest.Must(t, err)
	}
	storetest.Must(t, s.PausePace(ctx, []string{"pause over"}, time.Millisecond))
	storetest.Must(t, s.PausePace(ctx, []string{"pause on"}, time.Hour))
	_, err := s.TakePace(ctx, []core.PaceWindow{{Key: "busy", Rate: core.Rate{N: 5, Per: time.Hour}}}, nil)
	storetest.Must(t, err)
	time.Sleep(5 * time.Millisecond)
	s.pacePrune.Store(0)
	_, err = s.TakePace(ctx, []core.PaceWindow{{Key: "busy", Rate: core.Rate{N: 5, Per: time.Hour}}}, nil)
	storetest.Must(t, err)
	var kept []string
	rows, err := s.pool.Query(ctx, `SELECT convert_from(key, 'UTF8') FROM pace ORDER BY key`)
	storetest.Must(t, err)
	for rows.Next() {
		var k string
		storetest.Must(t, rows.Scan(&k))
		kept = append(kept, k)
	}
	storetest.Must(t, rows.Err())
	if want := []string{"busy", "pause on"}; !slices.Equal(kept, want) {
		t.Errorf("rows kept %q, want %q", kept, want)
	}
	if next := time.Unix(0, s.pacePrune.Load()); time.Until(next) < 50*time.Second {
		t.Errorf("the next prune is due at %s, want about a minute from now", next)
	}
}

// A database of schema version 3 gains the pacing table on open.
func TestPaceMigratesFromVersion3(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	_, err := s.pool.Exec(ctx, `DROP FUNCTION parley_pace_take; DROP TABLE pace; UPDATE schema_version SET version = 3`)
	storetest.Must(t, err)
	storetest.Must(t, s.Close())
	s = openURL(t, srv.URL, storetest.Options{})
	storetest.Must(t, s.Check(ctx))
	if take, err := s.TakePace(ctx, []core.PaceWindow{{Key: "k", Rate: core.Rate{N: 1, Per: time.Second}}}, nil); err != nil || !take.Taken() {
		t.Fatalf("after migrating: %+v, %v", take, err)
	}
}

// A store that is closed, or a database that is gone, answers with an
// error within the caller's deadline, never a hang.
func TestPaceFailsWhenTheDatabaseIsGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	storetest.Must(t, srv.Stop("fast"))
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := s.TakePace(cctx, []core.PaceWindow{{Key: "k", Rate: core.Rate{N: 1, Per: time.Second}}}, nil); err == nil {
		t.Error("a take on a stopped database succeeded")
	}
	if err := s.PausePace(cctx, []string{"k"}, time.Second); err == nil {
		t.Error("a pause on a stopped database succeeded")
	}
	storetest.Must(t, s.Close())
	if _, err := s.TakePace(ctx, nil, nil); err != ErrClosed {
		t.Errorf("a take after Close: %v, want ErrClosed", err)
	}
}

// BenchmarkTakePace measures a shared take as the outbox makes it for a
// Telegram send: three windows (the conversation's, the group's, the bot's)
// and six pause keys, every take granted; by one taker, and by 24 takers
// spread over three instances, each in a group of its own: every take of
// one bot locks its account row, so they queue there for each other. b.N
// is the total number of takes.
func BenchmarkTakePace(b *testing.B) {
	for _, c := range []struct{ takers, instances int }{{1, 1}, {24, 3}} {
		b.Run(fmt.Sprintf("takers=%d/instances=%d", c.takers, c.instances), func(b *testing.B) {
			ctx := context.Background()
			srv := pgtest.StartDurable(b)
			stores := make([]*Store, c.instances)
			for i := range stores {
				s, err := Open(ctx, srv.URL, Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				stores[i] = s
			}
			// Never full: the cost of a take, not of waiting.
			free := core.Rate{N: 1 << 30, Per: 10 * time.Millisecond}
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			for w := range c.takers {
				s := stores[w%len(stores)]
				group := fmt.Sprint("-100", w)
				windows := []core.PaceWindow{
					{Key: "c\x00telegram\x00" + group + "\x00topic\x000", Rate: free},
					{Key: "g\x00telegram\x00" + group + "\x001", Rate: free},
					{Key: "a\x00telegram\x002", Rate: free},
				}
				pauses := []string{"c\x00" + group, "c\x00" + group + "\x00k0", "g\x00" + group, "g\x00" + group + "\x00k0", "a", "a\x00k0"}
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						take, err := s.TakePace(ctx, windows, pauses)
						if err != nil || !take.Taken() {
							b.Errorf("take: %+v, %v", take, err)
							return
						}
					}
				})
			}
			wg.Wait()
		})
	}
}
