package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
)

// Journal claims (core.DeliveryClaimer): every instance sees every
// journaled event, and the one that claims it sends its operations. A claim
// is two columns of the journal row, the claimant and an expiry computed by
// the database's clock (now() + ttl in the statement), never an instance's:
// instances may disagree about the time, not about the database's. A claim
// is taken by a single UPDATE whose WHERE admits only an unclaimed row, an
// expired claim or the claimant's own; two instances updating one row are
// serialized by its row lock, and the second re-evaluates the WHERE on the
// first's committed row and takes nothing. A batch (the start-up replay,
// the periodic scan for abandoned claims) locks its candidate rows FOR NO
// KEY UPDATE SKIP LOCKED, so two scanning instances split the journal
// between them instead of queueing behind each other, and a confirmation
// (which takes only a key-share lock through journal_done's foreign key)
// never blocks a scan. The row lock lasts one statement: delivery itself,
// which may wait minutes behind a platform's pacing, holds no transaction;
// the expiry, renewed while the operations are pending, is what holds the
// event. Confirmations (ConfirmDelivery) do not look at claims: a confirmed
// key records that the platform took the operation, which is true whoever
// sent it, so a stale claimant's confirmation is accepted and saves the new
// claimant a repeat.

var _ core.DeliveryClaimer = (*Store)(nil)

// micros is d as whole microseconds, the resolution of a PostgreSQL
// interval, for `$n * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// ClaimDelivery implements core.DeliveryClaimer.
func (s *Store) ClaimDelivery(ctx context.Context, seq uint64, instance core.InstanceID, ttl time.Duration) (bool, error) {
	var got bool
	err := s.statement(ctx, func() error {
		tag, err := s.pool.Exec(ctx, `UPDATE journal
			SET claimed_by = $2, claim_until = now() + $3 * interval '1 microsecond'
			WHERE seq = $1 AND (claimed_by IS NULL OR claimed_by = $2 OR claim_until <= now())`,
			int64(seq), string(instance), micros(ttl))
		got = err == nil && tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("postgres: claim delivery %d: %w", seq, err)
	}
	return got, nil
}

// ClaimDeliveries implements core.DeliveryClaimer in one statement: lock
// the free rows (skipping those another transaction holds), claim them, and
// read them back with their confirmed keys as Deliveries does.
func (s *Store) ClaimDeliveries(ctx context.Context, after, upTo uint64, limit int, instance core.InstanceID, ttl time.Duration) ([]core.Delivery, error) {
	var out []core.Delivery
	err := s.statement(ctx, func() error {
		out = out[:0]
		rows, err := s.pool.Query(ctx, `WITH free AS (
				SELECT seq FROM journal
				WHERE seq > $1 AND seq <= $5 AND (claimed_by IS NULL OR claim_until <= now())
				ORDER BY seq LIMIT $2
				FOR NO KEY UPDATE SKIP LOCKED
			), claimed AS (
				UPDATE journal j SET claimed_by = $3, claim_until = now() + $4 * interval '1 microsecond'
				FROM free WHERE j.seq = free.seq
				RETURNING j.seq, j.data, j.message_id
			)
			SELECT c.seq, c.data, c.message_id, m.data,
				ARRAY(SELECT d.key FROM journal_done d WHERE d.seq = c.seq ORDER BY d.key)
			FROM claimed c LEFT JOIN messages m ON m.id = c.message_id
			ORDER BY c.seq`, int64(after), limitArg(limit), string(instance), micros(ttl), int64(upTo))
		if err != nil {
			return err
		}
		var seq int64
		var data, msgID, msgData []byte
		var done [][]byte
		_, err = pgx.ForEachRow(rows, []any{&seq, &data, &msgID, &msgData, &done}, func() error {
			e, err := decodeEvent(seq, data, msgID, msgData)
			if err != nil {
				return fmt.Errorf("journaled %w", err)
			}
			d := core.Delivery{Event: e}
			for _, k := range done {
				d.Done = append(d.Done, string(k))
			}
			out = append(out, d)
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: claim deliveries: %w", err)
	}
	return out, nil
}

// RenewClaims implements core.DeliveryClaimer. An expired claim nobody
// took over is renewed too: it was never anyone else's.
func (s *Store) RenewClaims(ctx context.Context, instance core.InstanceID, seqs []uint64, ttl time.Duration) ([]uint64, error) {
	if len(seqs) == 0 {
		return nil, nil
	}
	var held []uint64
	err := s.statement(ctx, func() error {
		held = held[:0]
		rows, err := s.pool.Query(ctx, `UPDATE journal SET claim_until = now() + $3 * interval '1 microsecond'
			WHERE claimed_by = $1 AND seq = ANY($2) RETURNING seq`, string(instance), int64s(seqs), micros(ttl))
		if err != nil {
			return err
		}
		var seq int64
		_, err = pgx.ForEachRow(rows, []any{&seq}, func() error {
			held = append(held, uint64(seq))
			return nil
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: renew claims: %w", err)
	}
	return held, nil
}

// ReleaseClaims implements core.DeliveryClaimer.
func (s *Store) ReleaseClaims(ctx context.Context, instance core.InstanceID, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	err := s.statement(ctx, func() error {
		_, err := s.pool.Exec(ctx, `UPDATE journal SET claimed_by = NULL, claim_until = NULL
			WHERE claimed_by = $1 AND seq = ANY($2)`, string(instance), int64s(seqs))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: release claims: %w", err)
	}
	return nil
}

// statement runs fn, which makes one statement, in the statement's own
// implicit transaction: one round trip where direct's explicit one takes
// three, on the path of every journaled event. Like direct it refuses
// after Close and retries a deadlock or serialization failure.
func (s *Store) statement(ctx context.Context, fn func() error) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		err := fn()
		if err == nil || !retryable(err) || attempt == maxRetries {
			return err
		}
	}
}

func int64s(seqs []uint64) []int64 {
	out := make([]int64, len(seqs))
	for i, s := range seqs {
		out[i] = int64(s)
	}
	return out
}
