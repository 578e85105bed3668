package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
)

// Cleanup-ledger claims (core.CleanupClaimer), built like the journal's
// (claim.go): a due row's claimant and expiry are two columns of the row,
// the expiry computed by the database's clock. The instance whose rule
// marks a row due claims it in the same statement (an upsert whose
// conflict branch leaves a row another live instance holds alone), so no
// scanner ever sees a due row of a live instance unclaimed. The periodic
// scan claims the due rows nobody holds, locking its candidates FOR NO KEY
// UPDATE SKIP LOCKED so that scanners split the ledger instead of queueing.
// Deleting a row (RemoveCleanup) does not look at claims: the message is
// gone, whoever deleted it.

var _ core.CleanupClaimer = (*Store)(nil)

// ledgerRefs are refs as the four key columns' arrays, sorted by key so
// that two statements over the same rows lock them in the same order.
func ledgerRefs(refs []core.MessageRef) (adapter, chat, thread, message [][]byte) {
	refs = slices.Clone(refs)
	slices.SortFunc(refs, func(a, b core.MessageRef) int { return bytes.Compare(ledgerKey(a), ledgerKey(b)) })
	for _, r := range refs {
		adapter, chat = append(adapter, []byte(r.Adapter)), append(chat, []byte(r.Place.Chat))
		thread, message = append(thread, []byte(r.Place.Thread)), append(message, []byte(r.ID))
	}
	return adapter, chat, thread, message
}

// collectRefs reads rows of the four key columns.
func collectRefs(rows pgx.Rows) ([]core.MessageRef, error) {
	var out []core.MessageRef
	var adapter, chat, thread, message []byte
	_, err := pgx.ForEachRow(rows, []any{&adapter, &chat, &thread, &message}, func() error {
		out = append(out, core.MessageRef{Adapter: core.AdapterName(adapter),
			Place: core.Place{Chat: string(chat), Thread: string(thread)}, ID: string(message)})
		return nil
	})
	return out, err
}

// ClaimDueCleanup implements core.CleanupClaimer.
func (s *Store) ClaimDueCleanup(ctx context.Context, instance string, ttl time.Duration, rows ...core.CleanupEntry) ([]core.MessageRef, error) {
	rows = slices.Clone(rows) // marked due here, the caller's left alone
	for i := range rows {
		rows[i].Due = true
	}
	prepared, err := prepareCleanup(s.clock(), "", rows)
	if err != nil {
		return nil, fmt.Errorf("postgres: claim due cleanup: %w", err)
	}
	if len(prepared) == 0 {
		return nil, nil
	}
	m := make(map[string]ledgerRow, len(prepared))
	for _, r := range prepared {
		m[string(r.key)] = r
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
	var adapter, chat, thread, message, session, data [][]byte
	var created []time.Time
	for _, k := range keys {
		r := m[k]
		adapter, chat = append(adapter, []byte(r.ref.Adapter)), append(chat, []byte(r.ref.Place.Chat))
		thread, message = append(thread, []byte(r.ref.Place.Thread)), append(message, []byte(r.ref.ID))
		session, created, data = append(session, []byte(r.session)), append(created, r.created), append(data, r.val)
	}
	var out []core.MessageRef
	err = s.statement(ctx, func() error {
		rows, err := s.pool.Query(ctx, `INSERT INTO ledger AS l (adapter, chat, thread, message, session_id, created, data, claimed_by, claim_until)
			SELECT a, c, t, m, s, cr, d, $8, now() + $9 * interval '1 microsecond'
			FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[], $5::bytea[], $6::timestamptz[], $7::bytea[]) AS r(a, c, t, m, s, cr, d)
			ON CONFLICT (adapter, chat, thread, message) DO UPDATE
			SET session_id = excluded.session_id, created = excluded.created, data = excluded.data,
				claimed_by = excluded.claimed_by, claim_until = excluded.claim_until
			WHERE l.claimed_by IS NULL OR l.claimed_by = excluded.claimed_by OR l.claim_until <= now()
			RETURNING l.adapter, l.chat, l.thread, l.message`,
			adapter, chat, thread, message, session, created, data, instance, micros(ttl))
		if err != nil {
			return err
		}
		out, err = collectRefs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim due cleanup: %w", err)
	}
	return out, nil
}

// ClaimPendingCleanup implements core.CleanupClaimer in one statement:
// lock the free due rows (skipping those another transaction holds) and
// claim them.
func (s *Store) ClaimPendingCleanup(ctx context.Context, instance string, limit int, ttl time.Duration) ([]core.CleanupEntry, error) {
	var out []core.CleanupEntry
	err := s.statement(ctx, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `WITH free AS (
				SELECT adapter, chat, thread, message FROM ledger
				WHERE due AND (claimed_by IS NULL OR claim_until <= now())
				ORDER BY created LIMIT $1
				FOR NO KEY UPDATE SKIP LOCKED
			)
			UPDATE ledger l SET claimed_by = $2, claim_until = now() + $3 * interval '1 microsecond'
			FROM free
			WHERE l.adapter = free.adapter AND l.chat = free.chat AND l.thread = free.thread AND l.message = free.message
			RETURNING l.data`, limitArg(limit), instance, micros(ttl))
		if err != nil {
			return err
		}
		var data []byte
		_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
			var r core.CleanupEntry
			if err := json.Unmarshal(data, &r); err != nil {
				return fmt.Errorf("row %q: %w", data, err)
			}
			out = append(out, r)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim pending cleanup: %w", err)
	}
	// Oldest first, as the scan asked; RETURNING keeps no order.
	slices.SortStableFunc(out, func(a, b core.CleanupEntry) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return bytes.Compare(ledgerKey(a.Ref), ledgerKey(b.Ref))
	})
	return out, nil
}

// RenewCleanupClaims implements core.CleanupClaimer. An expired claim
// nobody took over is renewed too: it was never anyone else's.
func (s *Store) RenewCleanupClaims(ctx context.Context, instance string, refs []core.MessageRef, ttl time.Duration) ([]core.MessageRef, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	adapter, chat, thread, message := ledgerRefs(refs)
	var out []core.MessageRef
	err := s.statement(ctx, func() error {
		rows, err := s.pool.Query(ctx, `UPDATE ledger l SET claim_until = now() + $6 * interval '1 microsecond'
			FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[]) AS r(adapter, chat, thread, message)
			WHERE l.adapter = r.adapter AND l.chat = r.chat AND l.thread = r.thread AND l.message = r.message
				AND l.claimed_by = $5
			RETURNING l.adapter, l.chat, l.thread, l.message`, adapter, chat, thread, message, instance, micros(ttl))
		if err != nil {
			return err
		}
		out, err = collectRefs(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: renew cleanup claims: %w", err)
	}
	return out, nil
}

// ReleaseCleanupClaims implements core.CleanupClaimer.
func (s *Store) ReleaseCleanupClaims(ctx context.Context, instance string, refs []core.MessageRef) error {
	if len(refs) == 0 {
		return nil
	}
	adapter, chat, thread, message := ledgerRefs(refs)
	err := s.statement(ctx, func() error {
		_, err := s.pool.Exec(ctx, `UPDATE ledger l SET claimed_by = NULL, claim_until = NULL
			FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[]) AS r(adapter, chat, thread, message)
			WHERE l.adapter = r.adapter AND l.chat = r.chat AND l.thread = r.thread AND l.message = r.message
				AND l.claimed_by = $5`, adapter, chat, thread, message, instance)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: release cleanup claims: %w", err)
	}
	return nil
}
