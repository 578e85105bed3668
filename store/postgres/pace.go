package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
)

// Shared pacing (core.PaceLedger) lives in the table pace, one row per
// budget or pause key: the times of the slots taken within the budget's
// window, oldest first, and the end of a pause a platform asked for, both
// by the database's clock (clock_timestamp(), never an instance's). A take
// is one call of the function parley_pace_take (migration 4), so one round
// trip: it locks the rows of every window the operation counts in, in key
// order (two takers never deadlock; a second taker of a budget waits for
// the first's commit, microseconds, and then sees its slot), reads the
// time only once it holds them, and either appends that time to every
// window or, when one is full or a pause is on, changes nothing and says
// for how long each holds. Windows are trimmed to their Per on every take,
// so a row holds at most a budget's N slots; a row whose window and pause
// are both over (idle_at passed) is deleted by a take about once a minute
// per instance, a thousand at a time, skipping rows a taker holds.
//
// Every call has a deadline: the caller's, or paceTimeout, whichever comes
// first. Pauses are written by one INSERT … ON CONFLICT statement that
// keeps the later end.
//
// The table is UNLOGGED: a take is on the path of every platform call, and
// with a WAL flush per take it cost 1.4–3.1 ms here rather than 0.4 ms
// (BenchmarkTakePace). What it gives up is harmless: a crash of the
// database (or a failover to a standby) empties it, so for one window the
// instances pace by their own counts, as they do while the database is
// unreachable.

var _ core.PaceLedger = (*Store)(nil)

// paceTimeout bounds a pacing call whose context carries no earlier
// deadline: a database that does not answer within it is as good as gone
// for pacing, which goes on without it (see core/delivery's ledger use).
const paceTimeout = 5 * time.Second

// pacePruneEvery is how often a take also deletes idle rows.
const pacePruneEvery = time.Minute

// TakePace implements core.PaceLedger.
func (s *Store) TakePace(ctx context.Context, windows []core.PaceWindow, pauses []string) (core.PaceTake, error) {
	var take core.PaceTake
	if err := s.writable(); err != nil {
		return take, err
	}
	keys := make([][]byte, len(windows))
	ns := make([]int32, len(windows))
	pers := make([]int64, len(windows))
	for i, w := range windows {
		if w.Rate.Unlimited() {
			return take, fmt.Errorf("postgres: take pace: window %q is unlimited", w.Key)
		}
		keys[i], ns[i], pers[i] = []byte(w.Key), int32(w.Rate.N), micros(w.Rate.Per)
	}
	ps := make([][]byte, len(pauses))
	for i, p := range pauses {
		ps[i] = []byte(p)
	}
	prune := false
	if now, at := time.Now().UnixNano(), s.pacePrune.Load(); now >= at {
		prune = s.pacePrune.CompareAndSwap(at, now+int64(pacePruneEvery))
	}
	ctx, cancel := context.WithTimeout(ctx, paceTimeout)
	defer cancel()
	err := s.statement(ctx, func() error {
		take = core.PaceTake{}
		rows, err := s.pool.Query(ctx, `SELECT held, wait_us, taken FROM parley_pace_take($1, $2, $3, $4, $5)`,
			keys, ns, pers, ps, prune)
		if err != nil {
			return err
		}
		var held []byte
		var wait *int64
		var taken *time.Time
		_, err = pgx.ForEachRow(rows, []any{&held, &wait, &taken}, func() error {
			if taken != nil {
				take.At = *taken
				return nil
			}
			take.Holds = append(take.Holds, core.PaceHold{Key: string(held), Wait: time.Duration(*wait) * time.Microsecond})
			return nil
		})
		return err
	})
	if err != nil {
		return core.PaceTake{}, fmt.Errorf("postgres: take pace: %w", err)
	}
	if take.At.IsZero() == take.Taken() {
		return core.PaceTake{}, fmt.Errorf("postgres: take pace: the ledger neither took nor refused (%d holds)", len(take.Holds))
	}
	return take, nil
}

// PausePace implements core.PaceLedger.
func (s *Store) PausePace(ctx context.Context, keys []string, d time.Duration) error {
	if len(keys) == 0 || d <= 0 {
		return nil
	}
	if err := s.writable(); err != nil {
		return err
	}
	ks := make([][]byte, len(keys))
	for i, k := range keys {
		ks[i] = []byte(k)
	}
	ctx, cancel := context.WithTimeout(ctx, paceTimeout)
	defer cancel()
	err := s.statement(ctx, func() error {
		// In key order, as takes lock, and each key once (ON CONFLICT
		// cannot change one row twice).
		_, err := s.pool.Exec(ctx, `INSERT INTO pace AS p (key, paused_until, idle_at)
			SELECT k, clock_timestamp() + $2 * interval '1 microsecond', clock_timestamp() + $2 * interval '1 microsecond'
			FROM (SELECT DISTINCT k FROM unnest($1::bytea[]) k) d ORDER BY k
			ON CONFLICT (key) DO UPDATE SET
				paused_until = greatest(p.paused_until, excluded.paused_until),
				idle_at = greatest(p.idle_at, excluded.paused_until)`, ks, micros(d))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: pause pace: %w", err)
	}
	return nil
}
