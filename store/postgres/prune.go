package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// Prune implements store.Store (see store.PruneOptions for what it removes).
// Each kind is deleted in transactions of at most opts.Batch rows, next to
// the appends: none takes the counters row. Dedup keys go by their message
// id, whose time-ordered layout makes "made before the cut" a range of the
// dedup_by_message index: every id of an earlier millisecond sorts before
// the id of the cut's millisecond with zero entropy.
func (s *Store) Prune(ctx context.Context, opts store.PruneOptions) (store.PruneStats, error) {
	if opts.Batch <= 0 {
		opts.Batch = store.DefaultPruneBatch
	}
	var st store.PruneStats
	if err := ctx.Err(); err != nil {
		return st, fmt.Errorf("postgres: prune: %w", err)
	}
	cutMS := max(opts.Before.UnixMilli(), 0)
	cutID := []byte(core.EncodeID(uint64(cutMS), [10]byte{}))
	var err error
	st.Dedup, err = s.pruneBatches(ctx, `DELETE FROM dedup WHERE key IN
		(SELECT key FROM dedup WHERE message_id < $1 LIMIT $2)`, cutID, opts.Batch)
	if err != nil {
		return st, fmt.Errorf("postgres: prune dedup keys: %w", err)
	}
	if st.Cursors, err = s.pruneCursors(ctx, opts.CursorPrefixes, cutMS); err != nil {
		return st, fmt.Errorf("postgres: prune cursors: %w", err)
	}
	st.Ledger, err = s.pruneBatches(ctx, `DELETE FROM ledger WHERE (adapter, chat, thread, message) IN
		(SELECT adapter, chat, thread, message FROM ledger WHERE created < $1 LIMIT $2)`, time.UnixMilli(cutMS), opts.Batch)
	if err != nil {
		return st, fmt.Errorf("postgres: prune cleanup ledger: %w", err)
	}
	return st, nil
}

// pruneBatches runs a delete of at most batch rows until it deletes fewer,
// and returns how many it deleted.
func (s *Store) pruneBatches(ctx context.Context, sql string, cut any, batch int) (int, error) {
	removed := 0
	for {
		var n int64
		err := s.direct(ctx, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, sql, cut, int64(batch))
			n = tag.RowsAffected()
			return err
		})
		removed += int(n)
		if err != nil {
			return removed, err
		}
		if n < int64(batch) {
			return removed, nil
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
	}
}

// pruneCursors removes the reservation cursors (names starting with one of
// prefixes) whose value is an id made before cutMS. Cursors are few: they
// are read whole, and a value changed since is left alone.
func (s *Store) pruneCursors(ctx context.Context, prefixes []string, cutMS int64) (int, error) {
	if len(prefixes) == 0 {
		return 0, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT name, value FROM cursors`)
	if err != nil {
		return 0, err
	}
	var names, values [][]byte
	var name, value []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &value}, func() error {
		for _, p := range prefixes {
			if p != "" && strings.HasPrefix(string(name), p) {
				if ms, ok := core.IDMillis(string(value)); ok && ms < cutMS {
					names, values = append(names, name), append(values, value)
				}
				return nil
			}
		}
		return nil
	})
	if err != nil || len(names) == 0 {
		return 0, err
	}
	var n int64
	err = s.direct(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM cursors c USING unnest($1::bytea[], $2::bytea[]) AS r(name, value)
			WHERE c.name = r.name AND c.value = r.value`, names, values)
		n = tag.RowsAffected()
		return err
	})
	return int(n), err
}
