package postgres

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
)

// AddCleanup records ledger rows, replacing rows for the same Ref (adapter,
// place and message id). Rows without Created get now. A row without
// Ref.ID is refused and nothing is written.
func (s *Store) AddCleanup(ctx context.Context, rows ...core.CleanupEntry) error {
	prepared, err := prepareCleanup(s.clock(), "", rows)
	if err != nil {
		return fmt.Errorf("postgres: add cleanup: %w", err)
	}
	if len(prepared) == 0 {
		return nil
	}
	m := make(map[string]ledgerRow, len(prepared))
	for _, r := range prepared {
		m[string(r.key)] = r
	}
	err = s.direct(ctx, func(tx pgx.Tx) error {
		var b pgx.Batch
		queueLedger(&b, m)
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("postgres: add cleanup: %w", err)
	}
	return nil
}

// Cleanup returns the ledger rows of a session (all rows for an empty
// session), oldest first by Created.
func (s *Store) Cleanup(ctx context.Context, session core.SessionID) ([]core.CleanupEntry, error) {
	var rows pgx.Rows
	var err error
	if session == "" {
		rows, err = s.pool.Query(ctx, `SELECT data FROM ledger`)
	} else {
		rows, err = s.pool.Query(ctx, `SELECT data FROM ledger WHERE session_id = $1`, []byte(session))
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: cleanup %s: %w", session, err)
	}
	type keyed struct {
		key []byte
		row core.CleanupEntry
	}
	var found []keyed
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
		var r core.CleanupEntry
		if err := json.Unmarshal(data, &r); err != nil {
			return fmt.Errorf("row %q: %w", data, err)
		}
		found = append(found, keyed{ledgerKey(r.Ref), r})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: cleanup %s: %w", session, err)
	}
	// Ties (rows of one Append share Created) keep store/bolt's key order.
	slices.SortFunc(found, func(a, b keyed) int {
		return cmp.Or(a.row.Created.Compare(b.row.Created), bytes.Compare(a.key, b.key))
	})
	out := make([]core.CleanupEntry, len(found))
	for i, r := range found {
		out[i] = r.row
	}
	return out, nil
}

// RemoveCleanup deletes the rows for refs; missing rows are no error.
func (s *Store) RemoveCleanup(ctx context.Context, refs ...core.MessageRef) error {
	if len(refs) == 0 {
		return nil
	}
	refs = slices.Clone(refs) // sorted for the lock order, the caller's left alone
	slices.SortFunc(refs, func(a, b core.MessageRef) int { return bytes.Compare(ledgerKey(a), ledgerKey(b)) })
	var adapter, chat, thread, message [][]byte
	for _, r := range refs {
		adapter, chat = append(adapter, []byte(r.Adapter)), append(chat, []byte(r.Place.Chat))
		thread, message = append(thread, []byte(r.Place.Thread)), append(message, []byte(r.ID))
	}
	err := s.direct(ctx, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM ledger l USING unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[])
			AS r(adapter, chat, thread, message)
			WHERE l.adapter = r.adapter AND l.chat = r.chat AND l.thread = r.thread AND l.message = r.message`,
			adapter, chat, thread, message)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: remove cleanup: %w", err)
	}
	return nil
}

// Cursor returns an adapter's saved position, or "" when none was saved.
func (s *Store) Cursor(ctx context.Context, name string) (string, error) {
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM cursors WHERE name = $1`, []byte(name)).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("postgres: cursor %q: %w", name, err)
	}
	return string(v), nil
}

// SetCursor durably saves a position; saving "" forgets it.
func (s *Store) SetCursor(ctx context.Context, name, value string) error {
	if name == "" {
		return errors.New("postgres: set cursor: empty name")
	}
	err := s.direct(ctx, func(tx pgx.Tx) error {
		var err error
		if value == "" {
			_, err = tx.Exec(ctx, `DELETE FROM cursors WHERE name = $1`, []byte(name))
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO cursors VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
				[]byte(name), []byte(value))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: set cursor %q: %w", name, err)
	}
	return nil
}
