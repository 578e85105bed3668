package postgres

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/store"
)

// Import: another store's content taken whole (parley migrate, store.Copy),
// in one transaction that holds the counters row, so that no write of this
// or another instance interleaves and a failed copy leaves the database as
// empty as it found it. Rows go in with COPY, a batch at a time.

var _ store.Importer = (*Store)(nil)

// kindTables are each kind's table and the columns Import fills.
var kindTables = map[store.Kind]struct {
	table string
	cols  []string
}{
	store.KindSessions:   {"sessions", []string{"id", "status", "streaming", "data"}},
	store.KindPlaces:     {"places", []string{"adapter", "chat", "thread", "session_id"}},
	store.KindMessages:   {"messages", []string{"id", "session_id", "data"}},
	store.KindDedup:      {"dedup", []string{"key", "message_id"}},
	store.KindEvents:     {"events", []string{"seq", "message_id", "data"}},
	store.KindJournal:    {"journal", []string{"seq", "message_id", "data"}},
	store.KindLedger:     {"ledger", []string{"adapter", "chat", "thread", "message", "session_id", "created", "data"}},
	store.KindCursors:    {"cursors", []string{"name", "value"}},
	store.KindPairings:   {"pairing", []string{"code", "origin", "actor", "data"}},
	store.KindAdmissions: {"admitted", []string{"origin", "actor", "data"}},
}

// importBatch is how many rows one COPY carries.
const importBatch = 1000

// Count implements store.Importer.
func (s *Store) Count(ctx context.Context, kind store.Kind) (int, error) {
	t, ok := kindTables[kind]
	if !ok {
		return 0, fmt.Errorf("postgres: count: unknown kind %q", kind)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+t.table).Scan(&n); err != nil {
		return 0, fmt.Errorf("postgres: count %s: %w", kind, err)
	}
	return n, nil
}

// Import implements store.Importer.
func (s *Store) Import(ctx context.Context, c store.Counters, src func(store.Kind, func(store.Record) error) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var lastID []byte
		var lastSeq int64
		if err := tx.QueryRow(ctx, `SELECT last_id, last_seq FROM counters WHERE id = 1 FOR UPDATE`).Scan(&lastID, &lastSeq); err != nil {
			return err
		}
		empty := len(lastID) == 0 && lastSeq == 0
		for _, k := range store.Kinds {
			if !empty {
				break
			}
			var any bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM `+kindTables[k].table+`)`).Scan(&any); err != nil {
				return err
			}
			empty = !any
		}
		if !empty {
			return store.ErrNotEmpty
		}
		for _, k := range store.Kinds {
			if err := importKind(ctx, tx, k, src); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
		// The oldest event kept is where EventsSince tells a trimmed log
		// from a gap.
		_, err := tx.Exec(ctx, `UPDATE counters SET last_id = $1, last_seq = $2::bigint,
			events_from = COALESCE((SELECT min(seq) FROM events), $2::bigint + 1) WHERE id = 1`,
			append([]byte{}, c.LastID...), int64(c.LastSeq))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: import: %w", err)
	}
	return nil
}

// importKind copies every record of kind from src, a batch at a time.
func importKind(ctx context.Context, tx pgx.Tx, kind store.Kind, src func(store.Kind, func(store.Record) error) error) error {
	t := kindTables[kind]
	var rows [][]any
	flush := func() error {
		if len(rows) == 0 {
			return nil
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{t.table}, t.cols, pgx.CopyFromRows(rows))
		rows = rows[:0]
		return err
	}
	var done [][]any // journal_done rows
	err := src(kind, func(r store.Record) error {
		row, err := importRow(kind, r)
		if err != nil {
			return err
		}
		rows = append(rows, row)
		for _, key := range r.Done {
			done = append(done, []any{int64(r.Event.Seq), []byte(key)})
		}
		if len(rows) == importBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err == nil && len(done) > 0 {
		_, err = tx.CopyFrom(ctx, pgx.Identifier{"journal_done"}, []string{"seq", "key"}, pgx.CopyFromRows(done))
	}
	return err
}

// importRow is a record as its table's row, encoded as the store's own
// writes encode it.
func importRow(kind store.Kind, r store.Record) ([]any, error) {
	switch kind {
	case store.KindSessions:
		s := r.Session
		data, err := json.Marshal(s)
		return []any{[]byte(s.ID), string(s.Status), s.Output != "" && !s.OutputFinal, data}, err
	case store.KindPlaces:
		return []any{[]byte(r.Adapter), []byte(r.Place.Chat), []byte(r.Place.Thread), []byte(r.Value)}, nil
	case store.KindMessages:
		m := r.Message
		id := m.ID
		m.ID = ""
		data, err := json.Marshal(m)
		return []any{[]byte(id), []byte(m.Session), data}, err
	case store.KindDedup, store.KindCursors:
		return []any{[]byte(r.Key), []byte(r.Value)}, nil
	case store.KindEvents, store.KindJournal:
		e := r.Event
		seq := int64(e.Seq)
		e.Seq = 0
		data, err := json.Marshal(e)
		var ref []byte
		if r.Ref != "" {
			ref = []byte(r.Ref)
		}
		return []any{seq, ref, data}, err
	case store.KindLedger:
		c := r.Cleanup
		data, err := json.Marshal(c)
		return []any{[]byte(c.Ref.Adapter), []byte(c.Ref.Place.Chat), []byte(c.Ref.Place.Thread), []byte(c.Ref.ID),
			[]byte(c.Session), c.Created, data}, err
	case store.KindPairings:
		p := r.Pairing
		data, err := json.Marshal(p)
		return []any{[]byte(p.Code), []byte(p.Origin), []byte(p.Actor.ID), data}, err
	case store.KindAdmissions:
		a := r.Admission
		data, err := json.Marshal(a)
		return []any{[]byte(a.Origin), []byte(a.Actor.ID), data}, err
	}
	return nil, fmt.Errorf("unknown kind %q", kind)
}
