package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// eventsOp is one AppendEvents.
type eventsOp struct {
	evs  []store.PreparedEvent
	seqs []uint64
}

func (op *eventsOp) reads(*groupReads) {}

func (op *eventsOp) apply(g *group) error {
	op.seqs = g.putEvents(op.evs, nil)
	return nil
}

// AppendEvents appends events without an inbox message and returns them
// with Seq (and, when zero, Time) set. A Message on an event is stored with
// the event as given.
func (s *Store) AppendEvents(ctx context.Context, events ...core.Event) ([]core.Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	evs, err := store.PrepareEvents(s.clock(), "", events, false)
	if err != nil {
		return nil, fmt.Errorf("postgres: append events: %w", err)
	}
	op := &eventsOp{evs: evs}
	if err := s.update(ctx, op); err != nil {
		return nil, fmt.Errorf("postgres: append events: %w", err)
	}
	return store.FinishEvents(evs, op.seqs, nil), nil
}

// EventsSince returns up to limit events with Seq > after, oldest first; a
// limit of zero or less means all. When the log no longer holds after+1
// (and there are newer events) it returns no events and an error wrapping
// core.ErrEventsTruncated. Seqs are dense (assigned in commit order, and
// only the front of the log is trimmed), so the first row read says whether
// the log still reaches back to after+1: one statement, one snapshot.
func (s *Store) EventsSince(ctx context.Context, after uint64, limit int) ([]core.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT e.seq, e.data, e.message_id, m.data
		FROM events e LEFT JOIN messages m ON m.id = e.message_id
		WHERE e.seq > $1 ORDER BY e.seq LIMIT $2`, int64(after), limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: events since %d: %w", after, err)
	}
	var out []core.Event
	var seq int64
	var data, msgID, msgData []byte
	_, err = pgx.ForEachRow(rows, []any{&seq, &data, &msgID, &msgData}, func() error {
		if len(out) == 0 && uint64(seq) > after+1 {
			return fmt.Errorf("after %d, oldest kept is %d: %w", after, seq, core.ErrEventsTruncated)
		}
		e, err := decodeEvent(seq, data, msgID, msgData)
		out = append(out, e)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: events since %d: %w", after, err)
	}
	return out, nil
}

// LastEventSeq is the Seq of the newest event (0 when none).
func (s *Store) LastEventSeq(ctx context.Context) (uint64, error) {
	var last int64
	if err := s.pool.QueryRow(ctx, `SELECT last_seq FROM counters WHERE id = 1`).Scan(&last); err != nil {
		return 0, fmt.Errorf("postgres: last event seq: %w", err)
	}
	return uint64(last), nil
}

// Deliveries implements core.Store: journaled events after after, each with
// the keys of its confirmed operations, in one statement.
func (s *Store) Deliveries(ctx context.Context, after uint64, limit int) ([]core.Delivery, error) {
	rows, err := s.pool.Query(ctx, `SELECT j.seq, j.data, j.message_id, m.data,
			ARRAY(SELECT d.key FROM journal_done d WHERE d.seq = j.seq ORDER BY d.key)
		FROM journal j LEFT JOIN messages m ON m.id = j.message_id
		WHERE j.seq > $1 ORDER BY j.seq LIMIT $2`, int64(after), limitArg(limit))
	if err != nil {
		return nil, fmt.Errorf("postgres: deliveries: %w", err)
	}
	var out []core.Delivery
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
	if err != nil {
		return nil, fmt.Errorf("postgres: deliveries: %w", err)
	}
	return out, nil
}

// ConfirmDelivery implements core.Store. The last confirmation deletes the
// journal row, and its confirmations with it (ON DELETE CASCADE).
func (s *Store) ConfirmDelivery(ctx context.Context, seq uint64, key string, last bool) error {
	err := s.direct(ctx, func(tx pgx.Tx) error {
		if last {
			_, err := tx.Exec(ctx, `DELETE FROM journal WHERE seq = $1`, int64(seq))
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO journal_done (seq, key)
			SELECT $1, $2 WHERE EXISTS (SELECT 1 FROM journal WHERE seq = $1)
			ON CONFLICT DO NOTHING`, int64(seq), []byte(key))
		return err
	})
	// Finished in between (the last confirmation committed after this
	// statement's snapshot): the failed insert rolled back, and there is
	// nothing left to record. Checked after the transaction, which the
	// error aborted and could not commit.
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23503" {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("postgres: confirm delivery %d: %w", seq, err)
	}
	return nil
}
