package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// createOp is one CreateSession.
type createOp struct {
	sess core.Session
	val  []byte
	evs  []store.PreparedEvent

	exists bool
	seqs   []uint64
}

func (op *createOp) reads(r *groupReads) { r.sessions = append(r.sessions, []byte(op.sess.ID)) }

func (op *createOp) apply(g *group) error {
	op.exists, op.seqs = false, nil
	r, err := g.session([]byte(op.sess.ID))
	if err != nil {
		return err
	}
	if r.raw != nil {
		op.exists = true
		return nil
	}
	r.created = true
	g.setSession(r, op.val, &op.sess, nil)
	op.seqs = g.putEvents(op.evs, nil)
	return nil
}

// CreateSession stores a new session and its events. An empty ID gets a new
// id of the store's clock (core.SessionIDs), zero Created and Updated get now and an empty Status
// becomes idle. It returns an error wrapping core.ErrExists when the id is
// taken. A binding whose place another session is bound at takes that place
// over: the newest binding wins.
func (s *Store) CreateSession(ctx context.Context, sess core.Session, events ...core.Event) (core.Session, []core.Event, error) {
	now := s.clock()
	sess = cloneSession(sess)
	if sess.ID == "" {
		sess.ID = s.ids.New(now)
	}
	if sess.Created.IsZero() {
		sess.Created = now
	}
	if sess.Updated.IsZero() {
		sess.Updated = sess.Created
	}
	if sess.Status == "" {
		sess.Status = core.StatusIdle
	}
	val, err := json.Marshal(sess)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("postgres: create session: %w", err)
	}
	evs, err := store.PrepareEvents(now, sess.ID, events, false)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("postgres: create session: %w", err)
	}
	op := &createOp{sess: sess, val: val, evs: evs}
	if err := s.update(ctx, op); err != nil {
		return core.Session{}, nil, fmt.Errorf("postgres: create session %s: %w", sess.ID, err)
	}
	if op.exists {
		return core.Session{}, nil, fmt.Errorf("postgres: create session %s: %w", sess.ID, core.ErrExists)
	}
	return sess, store.FinishEvents(evs, op.seqs, nil), nil
}

// updateOp is one UpdateSession.
type updateOp struct {
	id  core.SessionID
	fn  func(*core.Session) error
	evs []store.PreparedEvent
	now time.Time

	found bool
	fnErr error
	raw   []byte
	seqs  []uint64
}

func (op *updateOp) reads(r *groupReads) { r.sessions = append(r.sessions, []byte(op.id)) }

func (op *updateOp) apply(g *group) error {
	op.found, op.fnErr, op.raw, op.seqs = false, nil, nil, nil
	r, err := g.session([]byte(op.id))
	if err != nil {
		return err
	}
	if r.raw == nil {
		return nil
	}
	op.found = true
	// A fresh copy each run: fn shares nothing with an earlier run.
	cur, err := decodeSession(r.raw)
	if err != nil {
		return fmt.Errorf("session %s: %w", op.id, err)
	}
	old := maps.Clone(cur.Bindings)
	updated := cur.Updated
	if err := op.fn(&cur); err != nil {
		op.fnErr = err
		return nil
	}
	val, err := encodeSession(op.id, &cur, r.raw, updated, op.now)
	if err != nil {
		op.fnErr = err
		return nil
	}
	if val != nil {
		g.setSession(r, val, &cur, old)
	}
	op.raw = r.raw
	op.seqs = g.putEvents(op.evs, nil)
	return nil
}

// UpdateSession applies fn to a fresh copy of the stored session and stores
// the result with events in one transaction. fn runs inside the committer,
// may run more than once and must not call the Store. An error from fn
// aborts the update (nothing is written) and is returned wrapped. fn cannot
// change the id; when fn changes something but leaves Updated alone, Updated
// is set to now; when it changes nothing, only the events are written.
// Missing sessions give an error wrapping core.ErrNotFound.
func (s *Store) UpdateSession(ctx context.Context, id core.SessionID, fn func(*core.Session) error, events ...core.Event) (core.Session, []core.Event, error) {
	now := s.clock()
	evs, err := store.PrepareEvents(now, id, events, false)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("postgres: update session %s: %w", id, err)
	}
	op := &updateOp{id: id, fn: fn, evs: evs, now: now}
	err = s.update(ctx, op)
	switch {
	case err != nil:
		return core.Session{}, nil, fmt.Errorf("postgres: update session %s: %w", id, err)
	case !op.found:
		return core.Session{}, nil, fmt.Errorf("postgres: update session %s: %w", id, core.ErrNotFound)
	case op.fnErr != nil:
		return core.Session{}, nil, fmt.Errorf("postgres: update session %s: %w", id, op.fnErr)
	}
	sess, err := decodeSession(op.raw)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("postgres: update session %s: %w", id, err)
	}
	return sess, store.FinishEvents(evs, op.seqs, nil), nil
}

// Session returns one session, or an error wrapping core.ErrNotFound.
func (s *Store) Session(ctx context.Context, id core.SessionID) (core.Session, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT data FROM sessions WHERE id = $1`, []byte(id)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Session{}, fmt.Errorf("postgres: session %s: %w", id, core.ErrNotFound)
	}
	if err != nil {
		return core.Session{}, fmt.Errorf("postgres: session %s: %w", id, err)
	}
	sess, err := decodeSession(raw)
	if err != nil {
		return core.Session{}, fmt.Errorf("postgres: session %s: %w", id, err)
	}
	return sess, nil
}

// Sessions returns all sessions, oldest first by Created, then by id.
func (s *Store) Sessions(ctx context.Context) ([]core.Session, error) {
	out, err := s.querySessions(ctx, `SELECT id, data FROM sessions ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: sessions: %w", err)
	}
	slices.SortStableFunc(out, func(a, b core.Session) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// SessionAt returns the session bound at place on adapter, or an error
// wrapping core.ErrNotFound.
func (s *Store) SessionAt(ctx context.Context, adapter core.AdapterName, place core.Place) (core.Session, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT s.data FROM places p JOIN sessions s ON s.id = p.session_id
		WHERE p.adapter = $1 AND p.chat = $2 AND p.thread = $3`,
		[]byte(adapter), []byte(place.Chat), []byte(place.Thread)).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Session{}, fmt.Errorf("postgres: session at %s %q/%q: %w", adapter, place.Chat, place.Thread, core.ErrNotFound)
	}
	if err != nil {
		return core.Session{}, fmt.Errorf("postgres: session at %s %q/%q: %w", adapter, place.Chat, place.Thread, err)
	}
	sess, err := decodeSession(raw)
	if err != nil {
		return core.Session{}, fmt.Errorf("postgres: session at %s %q/%q: %w", adapter, place.Chat, place.Thread, err)
	}
	return sess, nil
}

// SessionsPage implements core.Store: newest first by id, from the cursor
// on, filtered by the status and streaming columns kept next to each
// session's JSON. One session more than the page is read to know whether
// there is a next page.
func (s *Store) SessionsPage(ctx context.Context, q core.SessionQuery) ([]core.Session, core.SessionID, error) {
	var where []string
	var args []any
	if q.After != "" {
		args = append(args, []byte(q.After))
		where = append(where, fmt.Sprintf("id < $%d", len(args)))
	}
	if q.Status != "" {
		args = append(args, string(q.Status))
		where = append(where, fmt.Sprintf("status = $%d", len(args)))
	}
	if q.Streaming {
		where = append(where, "streaming")
	}
	sql := `SELECT id, data FROM sessions`
	if len(where) > 0 {
		sql += " WHERE " + strings.Join(where, " AND ")
	}
	sql += " ORDER BY id DESC"
	if q.Limit > 0 {
		args = append(args, int64(q.Limit)+1)
		sql += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	out, err := s.querySessions(ctx, sql, args...)
	if err != nil {
		return nil, "", fmt.Errorf("postgres: sessions page: %w", err)
	}
	var next core.SessionID
	if q.Limit > 0 && len(out) > q.Limit {
		out = out[:q.Limit]
		next = out[len(out)-1].ID
	}
	return out, next, nil
}

func (s *Store) querySessions(ctx context.Context, sql string, args ...any) ([]core.Session, error) {
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	var out []core.Session
	var id, raw []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		sess, err := decodeSession(raw)
		if err != nil {
			return fmt.Errorf("session %s: %w", id, err)
		}
		out = append(out, sess)
		return nil
	})
	return out, err
}
