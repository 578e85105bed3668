package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// appendOp is one Append: what is prepared outside the transaction, and
// what its last run inside found.
type appendOp struct {
	msg      core.Message // ID empty until the append is stored
	body     []byte       // msg as stored: JSON without the id
	dedupKey []byte
	sid      []byte
	update   func(*core.Session)
	evs      []store.PreparedEvent
	rows     []ledgerRow
	now      time.Time

	id        core.MessageID
	notFound  bool
	updateErr error
	sessRaw   []byte // the session after the append, as stored
	seqs      []uint64
	dup       bool
	dupID     []byte
	dupMsg    []byte
}

// Append durably appends one inbox message with its dedup key, session
// update, events and ledger rows in one transaction (see core.Append), and
// returns once that transaction committed. An error wrapping
// core.ErrNotFound means the session does not exist; then nothing was
// written. A duplicate DedupKey, also one appended at the same moment by
// another instance, writes nothing and returns the first message and the
// current session with Duplicate set.
//
// Update runs inside the committer on a fresh copy of the session and must
// not call the Store. When it changes the session but leaves Updated alone,
// Updated is set to now; when it changes nothing, the session is not
// written. Events and ledger rows without a Session get the message's;
// ledger rows without Created get now.
func (s *Store) Append(ctx context.Context, a core.Append) (core.AppendResult, error) {
	now := s.clock()
	op := &appendOp{msg: store.CloneMessage(a.Message), update: a.Update, now: now}
	if op.msg.Session == "" {
		return core.AppendResult{}, fmt.Errorf("postgres: append: message has no session: %w", core.ErrNotFound)
	}
	if op.msg.Time.IsZero() {
		op.msg.Time = now
	}
	op.msg.ID = ""
	var err error
	if op.body, err = json.Marshal(op.msg); err != nil {
		return core.AppendResult{}, fmt.Errorf("postgres: append: %w", err)
	}
	op.dedupKey = []byte(a.DedupKey)
	if op.evs, err = store.PrepareEvents(now, op.msg.Session, a.Events, true); err != nil {
		return core.AppendResult{}, fmt.Errorf("postgres: append: %w", err)
	}
	if op.rows, err = prepareCleanup(now, op.msg.Session, a.Cleanup); err != nil {
		return core.AppendResult{}, fmt.Errorf("postgres: append: %w", err)
	}
	op.sid = []byte(op.msg.Session)
	if err := s.update(ctx, op); err != nil {
		return core.AppendResult{}, fmt.Errorf("postgres: append: %w", err)
	}
	return op.result()
}

func (op *appendOp) reads(r *groupReads) {
	r.sessions = append(r.sessions, op.sid)
	if len(op.dedupKey) > 0 {
		r.dedup = append(r.dedup, op.dedupKey)
	}
}

func (op *appendOp) apply(g *group) error {
	op.id, op.notFound, op.updateErr, op.sessRaw, op.seqs = "", false, nil, nil, nil
	op.dup, op.dupID, op.dupMsg = false, nil, nil
	if len(op.dedupKey) > 0 {
		if d, ok := g.dedup[string(op.dedupKey)]; ok {
			op.dup, op.dupID, op.dupMsg = true, d.id, d.data
			r, err := g.session(d.session)
			if err != nil {
				return err
			}
			op.sessRaw = r.raw
			return nil
		}
	}
	r, err := g.session(op.sid)
	if err != nil {
		return err
	}
	if r.raw == nil {
		op.notFound = true
		return nil
	}
	if op.update != nil {
		sess, err := decodeSession(r.raw)
		if err != nil {
			return fmt.Errorf("session %s: %w", op.sid, err)
		}
		old := maps.Clone(sess.Bindings)
		updated := sess.Updated
		op.update(&sess)
		val, err := encodeSession(op.msg.Session, &sess, r.raw, updated, op.now)
		if err != nil {
			op.updateErr = err
			return nil
		}
		if val != nil {
			g.setSession(r, val, &sess, old)
		}
	}
	op.sessRaw = r.raw
	op.id = g.ids.next(op.now)
	id := []byte(op.id)
	g.msgs.ids, g.msgs.sessions, g.msgs.datas = append(g.msgs.ids, id), append(g.msgs.sessions, op.sid), append(g.msgs.datas, op.body)
	if len(op.dedupKey) > 0 {
		g.dedups[0], g.dedups[1] = append(g.dedups[0], op.dedupKey), append(g.dedups[1], id)
		g.dedup[string(op.dedupKey)] = dedupRow{id: id, data: op.body, session: op.sid}
	}
	op.seqs = g.putEvents(op.evs, id)
	g.putCleanup(op.rows)
	return nil
}

// result turns what the committed run found into the caller's result,
// decoding outside the committer.
func (op *appendOp) result() (core.AppendResult, error) {
	switch {
	case op.notFound:
		return core.AppendResult{}, fmt.Errorf("postgres: append: session %s: %w", op.msg.Session, core.ErrNotFound)
	case op.updateErr != nil:
		return core.AppendResult{}, fmt.Errorf("postgres: append: session %s: %w", op.msg.Session, op.updateErr)
	}
	var res core.AppendResult
	if op.dup {
		m, err := decodeMessage(op.dupID, op.dupMsg)
		if err != nil {
			return core.AppendResult{}, fmt.Errorf("postgres: append: %w", err)
		}
		res = core.AppendResult{Message: m, Duplicate: true}
	} else {
		op.msg.ID = op.id
		res = core.AppendResult{Message: op.msg, Events: store.FinishEvents(op.evs, op.seqs, &op.msg)}
	}
	if op.sessRaw != nil {
		var err error
		if res.Session, err = decodeSession(op.sessRaw); err != nil {
			return core.AppendResult{}, fmt.Errorf("postgres: append: session %s: %w", res.Message.Session, err)
		}
	}
	return res, nil
}

// limitArg is a LIMIT parameter: NULL (no limit) for n <= 0.
func limitArg(n int) any {
	if n <= 0 {
		return nil
	}
	return int64(n)
}

// Inbox returns up to limit messages with ids strictly after after (all when
// after is empty), oldest first; a limit of zero or less means no limit. An
// empty session means every session. An unknown session has no messages.
func (s *Store) Inbox(ctx context.Context, session core.SessionID, after core.MessageID, limit int) ([]core.Message, error) {
	var rows pgx.Rows
	var err error
	if session == "" {
		rows, err = s.pool.Query(ctx, `SELECT id, data FROM messages WHERE id > $1 ORDER BY id LIMIT $2`,
			[]byte(after), limitArg(limit))
	} else {
		rows, err = s.pool.Query(ctx, `SELECT id, data FROM messages WHERE session_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
			[]byte(session), []byte(after), limitArg(limit))
	}
	out, err := collectMessages(rows, err)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox %s after %s: %w", session, after, err)
	}
	return out, nil
}

// InboxTail implements core.Store: the newest n messages, read backwards
// along the index.
func (s *Store) InboxTail(ctx context.Context, session core.SessionID, n int) ([]core.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	var rows pgx.Rows
	var err error
	if session == "" {
		rows, err = s.pool.Query(ctx, `SELECT id, data FROM messages ORDER BY id DESC LIMIT $1`, int64(n))
	} else {
		rows, err = s.pool.Query(ctx, `SELECT id, data FROM messages WHERE session_id = $1 ORDER BY id DESC LIMIT $2`,
			[]byte(session), int64(n))
	}
	out, err := collectMessages(rows, err)
	if err != nil {
		return nil, fmt.Errorf("postgres: inbox tail %s: %w", session, err)
	}
	slices.Reverse(out)
	if out == nil {
		out = []core.Message{}
	}
	return out, nil
}

func collectMessages(rows pgx.Rows, err error) ([]core.Message, error) {
	if err != nil {
		return nil, err
	}
	var out []core.Message
	var id, data []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &data}, func() error {
		m, err := decodeMessage(id, data)
		out = append(out, m)
		return err
	})
	return out, err
}

// Deduped implements core.Store.
func (s *Store) Deduped(ctx context.Context, key string) (core.Message, bool, error) {
	var id, data []byte
	err := s.pool.QueryRow(ctx, `SELECT m.id, m.data FROM dedup d JOIN messages m ON m.id = d.message_id WHERE d.key = $1`,
		[]byte(key)).Scan(&id, &data)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Message{}, false, nil
	}
	if err != nil {
		return core.Message{}, false, fmt.Errorf("postgres: deduped: %w", err)
	}
	m, err := decodeMessage(id, data)
	if err != nil {
		return core.Message{}, false, fmt.Errorf("postgres: deduped: %w", err)
	}
	return m, true, nil
}
