package bolt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// ledgerRow is a cleanup row encoded outside the transaction.
type ledgerRow struct {
	key, val []byte
	session  core.SessionID
}

// prepareCleanup fills defaults (Session session when empty, Created now
// when zero) and encodes the rows. A row must name a platform message.
func prepareCleanup(now time.Time, session core.SessionID, rows []core.CleanupEntry) ([]ledgerRow, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	out := make([]ledgerRow, len(rows))
	for i, r := range rows {
		if r.Ref.ID == "" {
			return nil, fmt.Errorf("cleanup row %d has no message id", i)
		}
		if r.Session == "" {
			r.Session = session
		}
		if r.Created.IsZero() {
			r.Created = now
		}
		key := ledgerKey(r.Ref)
		if err := checkKey("cleanup ref", ledgerIndexKey(r.Session, key)); err != nil {
			return nil, err
		}
		val, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("cleanup row %d: %w", i, err)
		}
		out[i] = ledgerRow{key: key, val: val, session: r.Session}
	}
	return out, nil
}

// putCleanup stores rows, replacing earlier rows for the same Ref, and keeps
// ledger_by_session in step.
func putCleanup(tx *bbolt.Tx, rows []ledgerRow) error {
	if len(rows) == 0 {
		return nil
	}
	b := tx.Bucket(bucketLedger)
	idx := tx.Bucket(bucketLedgerBySes)
	for _, r := range rows {
		if old := b.Get(r.key); old != nil {
			if err := unindexRow(idx, r.key, old); err != nil {
				return err
			}
		}
		if err := b.Put(r.key, r.val); err != nil {
			return err
		}
		if err := idx.Put(ledgerIndexKey(r.session, r.key), nil); err != nil {
			return err
		}
	}
	return nil
}

// deleteCleanup deletes the row at key, whose value is val, and its index
// entry.
func deleteCleanup(tx *bbolt.Tx, key, val []byte) error {
	if err := unindexRow(tx.Bucket(bucketLedgerBySes), key, val); err != nil {
		return err
	}
	return tx.Bucket(bucketLedger).Delete(key)
}

// unindexRow deletes the index entry of the row at key whose value is val.
func unindexRow(idx *bbolt.Bucket, key, val []byte) error {
	var row struct {
		Session core.SessionID `json:"session_id"`
	}
	if err := json.Unmarshal(val, &row); err != nil {
		return fmt.Errorf("cleanup row %q: %w", key, err)
	}
	return idx.Delete(ledgerIndexKey(row.Session, key))
}

// ledgerIndexKey is the ledger_by_session key of the row at key.
func ledgerIndexKey(session core.SessionID, key []byte) []byte {
	return append(sessionPrefix(session), key...)
}

// indexLedger builds ledger_by_session from the ledger (the upgrade from
// schema version 1).
func indexLedger(tx *bbolt.Tx) error {
	idx := tx.Bucket(bucketLedgerBySes)
	return tx.Bucket(bucketLedger).ForEach(func(k, v []byte) error {
		var row struct {
			Session core.SessionID `json:"session_id"`
		}
		if err := json.Unmarshal(v, &row); err != nil {
			return fmt.Errorf("cleanup row %q: %w", k, err)
		}
		return idx.Put(ledgerIndexKey(row.Session, k), nil)
	})
}

// AddCleanup records ledger rows, replacing rows for the same Ref (adapter,
// place and message id). Rows without Created get now. A row without
// Ref.ID is refused and nothing is written.
func (s *Store) AddCleanup(ctx context.Context, rows ...core.CleanupEntry) error {
	prepared, err := prepareCleanup(s.clock(), "", rows)
	if err != nil {
		return fmt.Errorf("bolt: add cleanup: %w", err)
	}
	if len(prepared) == 0 {
		return nil
	}
	if err := s.update(ctx, func(w *wtx) error { return putCleanup(w.Tx, prepared) }); err != nil {
		return fmt.Errorf("bolt: add cleanup: %w", err)
	}
	return nil
}

// Cleanup returns the ledger rows of a session (all rows for an empty
// session), oldest first by Created. A session's rows are found through
// ledger_by_session: rules fire on every input and turn, and reading the
// whole ledger each time made them cost as much as the ledger is long.
func (s *Store) Cleanup(ctx context.Context, session core.SessionID) ([]core.CleanupEntry, error) {
	type keyed struct {
		key []byte
		row core.CleanupEntry
	}
	var rows []keyed
	add := func(k, v []byte) error {
		var r core.CleanupEntry
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("row %q: %w", k, err)
		}
		if session == "" || r.Session == session {
			rows = append(rows, keyed{bytes.Clone(k), r})
		}
		return nil
	}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		ledger := tx.Bucket(bucketLedger)
		if session == "" {
			return ledger.ForEach(add)
		}
		prefix := sessionPrefix(session)
		c := tx.Bucket(bucketLedgerBySes).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			key := k[len(prefix):]
			v := ledger.Get(key)
			if v == nil {
				return fmt.Errorf("indexed cleanup row %q is missing", key)
			}
			if err := add(key, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: cleanup %s: %w", session, err)
	}
	// Ties (rows of one Append share Created) keep a stable key order.
	slices.SortFunc(rows, func(a, b keyed) int {
		return cmp.Or(a.row.Created.Compare(b.row.Created), bytes.Compare(a.key, b.key))
	})
	out := make([]core.CleanupEntry, len(rows))
	for i, r := range rows {
		out[i] = r.row
	}
	return out, nil
}

// RemoveCleanup deletes the rows for refs; missing rows are no error.
func (s *Store) RemoveCleanup(ctx context.Context, refs ...core.MessageRef) error {
	if len(refs) == 0 {
		return nil
	}
	keys := make([][]byte, len(refs))
	for i, r := range refs {
		keys[i] = ledgerKey(r)
	}
	err := s.update(ctx, func(w *wtx) error {
		b := w.Bucket(bucketLedger)
		for _, k := range keys {
			if len(k) > bbolt.MaxKeySize {
				continue // never stored
			}
			v := b.Get(k)
			if v == nil {
				continue
			}
			if err := deleteCleanup(w.Tx, k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("bolt: remove cleanup: %w", err)
	}
	return nil
}

// Cursor returns an adapter's saved position, or "" when none was saved.
func (s *Store) Cursor(ctx context.Context, name string) (string, error) {
	var val string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		if name != "" {
			val = string(tx.Bucket(bucketCursors).Get([]byte(name)))
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("bolt: cursor %q: %w", name, err)
	}
	return val, nil
}

// SetCursor durably saves a position; saving "" forgets it.
func (s *Store) SetCursor(ctx context.Context, name, value string) error {
	key := []byte(name)
	if name == "" {
		return errors.New("bolt: set cursor: empty name")
	}
	if err := checkKey("cursor name", key); err != nil {
		return fmt.Errorf("bolt: set cursor: %w", err)
	}
	val := []byte(value)
	err := s.update(ctx, func(w *wtx) error {
		b := w.Bucket(bucketCursors)
		if value == "" {
			return b.Delete(key)
		}
		return b.Put(key, val)
	})
	if err != nil {
		return fmt.Errorf("bolt: set cursor %q: %w", name, err)
	}
	return nil
}
