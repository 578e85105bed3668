package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parley-chat/parley/core"
)

// maxGroup caps how many writes share one transaction, as in store/bolt.
const maxGroup = 1024

// maxRetries is how often a transaction that lost a deadlock or a
// serialization check is run again before its error is returned.
const maxRetries = 5

// writeOp is one caller's part of a group transaction. reads names what it
// will look up, so that the group fetches it for all its ops at once. apply
// may run more than once (when another op of its group fails) and must reset
// whatever it captured each time; it returns an error only for failures that
// must roll back the group, and records outcomes such as "not found" instead.
type writeOp interface {
	reads(r *groupReads)
	apply(g *group) error
}

// writeReq is one write waiting for the committer.
type writeReq struct {
	op   writeOp
	done chan error
}

// update runs op in a durable group transaction and returns once that
// transaction committed (or failed). When ctx is already done nothing is
// written; once queued, the write is waited for, so the caller never returns
// while its write might still commit.
func (s *Store) update(ctx context.Context, op writeOp) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{op: op, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	s.reqs <- req
	s.mu.RUnlock()
	return <-req.done
}

// commitLoop is this instance's one writer of ordered records. It takes the
// first queued write and every other write already queued behind it and
// commits them together, so the group is what piled up while the previous
// transaction was committing (and waiting for the counters row).
func (s *Store) commitLoop() {
	defer close(s.done)
	group := make([]*writeReq, 0, maxGroup)
	for first := range s.reqs {
		runtime.Gosched() // let the callers just answered queue their next write
		group = append(group[:0], first)
	fill:
		for len(group) < maxGroup {
			select {
			case r, ok := <-s.reqs:
				if !ok {
					break fill
				}
				group = append(group, r)
			default:
				break fill
			}
		}
		s.commitGroup(group)
		clear(group)
	}
}

// commitGroup commits the group in one transaction. When it fails for a
// reason other than a lost deadlock, each write is run again alone, so that
// its error is its own and not a side effect of its neighbours.
func (s *Store) commitGroup(group []*writeReq) {
	ops := make([]writeOp, len(group))
	for i, r := range group {
		ops[i] = r.op
	}
	err := s.runGroup(ops)
	if err == nil || len(group) == 1 {
		for _, r := range group {
			r.done <- err
		}
		return
	}
	for _, r := range group {
		r.done <- s.runGroup([]writeOp{r.op})
	}
}

// runGroup runs ops in one transaction, again when it lost a deadlock or a
// serialization check.
func (s *Store) runGroup(ops []writeOp) error {
	for attempt := 0; ; attempt++ {
		err := s.tryGroup(ops)
		if err == nil || !retryable(err) || attempt == maxRetries {
			return err
		}
	}
}

// retryable reports errors after which the same transaction may succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// groupReads is what a group's ops will look up.
type groupReads struct {
	sessions [][]byte
	dedup    [][]byte
}

// group is a transaction shared by a group of writes, with the state they
// share: the counters, the sessions and dedup keys as the group's earlier
// ops left them, and the rows to write, sent together at the end.
type group struct {
	ctx  context.Context
	conn *pgxpool.Conn // in the group's transaction
	s    *Store

	ids        idState
	lastSeq    uint64
	eventsFrom uint64
	countersIn []byte // last_id as read

	sessions map[string]*sessionRow
	dedup    map[string]dedupRow

	places     pgx.Batch // in op order: a later op may rebind what an earlier one bound
	newRows    []sessionRow
	msgs       rowsOf3
	dedups     [2][][]byte
	events     eventRows
	journal    eventRows
	ledger     map[string]ledgerRow
	eventsSeen bool
}

// sessionRow is a session as the group sees it.
type sessionRow struct {
	id        []byte
	raw       []byte // nil: no such session
	status    core.Status
	streaming bool
	created   bool // inserted by this group
	dirty     bool // to be written
}

// dedupRow is the message a dedup key points at.
type dedupRow struct {
	id, data, session []byte
}

type rowsOf3 [3][][]byte

type eventRows struct {
	seqs  []int64
	msgs  [][]byte
	datas [][]byte
}

func (r *eventRows) add(seq uint64, msg, data []byte) {
	r.seqs = append(r.seqs, int64(seq))
	r.msgs = append(r.msgs, msg)
	r.datas = append(r.datas, data)
}

// tryGroup runs ops in one transaction: it takes the counters row (the
// commit order), reads what the ops named, applies them in memory, writes
// the rows and commits. The transaction is begun and committed inside the
// batches of the reads and the writes rather than by statements of their
// own: the counters row is held from the first batch to the commit, and a
// round trip fewer in that window is a round trip less of every instance's
// serial section.
func (s *Store) tryGroup(ops []writeOp) (err error) {
	ctx := context.Background() // a caller's cancellation must not fail its group
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	open := false // a transaction may be open on conn
	defer func() {
		if err != nil && open {
			if _, rerr := conn.Exec(ctx, `ROLLBACK`); rerr != nil {
				// The connection's state is unknown: not back to the pool.
				_ = conn.Conn().Close(ctx)
			}
		}
	}()
	g := &group{ctx: ctx, conn: conn, s: s, sessions: map[string]*sessionRow{}, dedup: map[string]dedupRow{}}
	var r groupReads
	for _, op := range ops {
		op.reads(&r)
	}
	open = true
	if err := g.load(&r); err != nil {
		return err
	}
	for _, op := range ops {
		if err := safeApply(op, g); err != nil {
			return err
		}
	}
	if err := g.write(); err != nil {
		return err
	}
	open = false
	return nil
}

// safeApply turns a panic in an op (a caller's Update) into its error, so
// one bad caller cannot stop the committer every writer depends on.
func safeApply(op writeOp, g *group) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in write: %v", p)
		}
	}()
	return op.apply(g)
}

// load takes the counters row, which every group holds until it commits, and
// reads the sessions and dedup keys the ops named.
func (g *group) load(r *groupReads) error {
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(`SELECT last_id, last_seq, events_from FROM counters WHERE id = 1 FOR UPDATE`).QueryRow(func(row pgx.Row) error {
		var last, from int64
		if err := row.Scan(&g.countersIn, &last, &from); err != nil {
			return fmt.Errorf("counters: %w", err)
		}
		g.lastSeq, g.eventsFrom = uint64(last), uint64(from)
		return g.ids.parse(g.countersIn)
	})
	if len(r.sessions) > 0 {
		for _, id := range r.sessions {
			g.sessions[string(id)] = &sessionRow{id: id}
		}
		b.Queue(`SELECT id, data FROM sessions WHERE id = ANY($1)`, r.sessions).Query(func(rows pgx.Rows) error {
			var id, raw []byte
			_, err := pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
				g.sessions[string(id)].raw = raw
				return nil
			})
			return err
		})
	}
	if len(r.dedup) > 0 {
		b.Queue(`SELECT d.key, m.id, m.data, m.session_id FROM dedup d JOIN messages m ON m.id = d.message_id
			WHERE d.key = ANY($1)`, r.dedup).Query(func(rows pgx.Rows) error {
			var key []byte
			var d dedupRow
			_, err := pgx.ForEachRow(rows, []any{&key, &d.id, &d.data, &d.session}, func() error {
				g.dedup[string(key)] = d
				d = dedupRow{}
				return nil
			})
			return err
		})
	}
	return g.conn.SendBatch(g.ctx, &b).Close()
}

// session returns the session id as the group left it, reading it when no
// op named it.
func (g *group) session(id []byte) (*sessionRow, error) {
	if r, ok := g.sessions[string(id)]; ok {
		return r, nil
	}
	r := &sessionRow{id: id}
	err := g.conn.QueryRow(g.ctx, `SELECT data FROM sessions WHERE id = $1`, id).Scan(&r.raw)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	g.sessions[string(id)] = r
	return r, nil
}

// setSession records a session's new value, and moves its place index
// entries from the old bindings to sess's.
func (g *group) setSession(r *sessionRow, val []byte, sess *core.Session, old map[core.AdapterName]core.Binding) {
	r.raw = val
	r.status = sess.Status
	r.streaming = sess.Output != "" && !sess.OutputFinal
	r.dirty = true
	g.syncPlaces(r.id, old, sess.Bindings)
}

// syncPlaces queues the place index changes of a session's bindings going
// from old to cur. A place is only unindexed while it still points at this
// session: another session may have been bound there since.
func (g *group) syncPlaces(id []byte, old, cur map[core.AdapterName]core.Binding) {
	keep := make(map[placeKey]bool, len(cur))
	for name, b := range cur {
		if !b.Place.IsZero() {
			keep[placeKey{name, b.Place}] = true
		}
	}
	for name, b := range old {
		if k := (placeKey{name, b.Place}); !b.Place.IsZero() && !keep[k] {
			g.places.Queue(`DELETE FROM places WHERE adapter = $1 AND chat = $2 AND thread = $3 AND session_id = $4`,
				[]byte(k.adapter), []byte(k.place.Chat), []byte(k.place.Thread), id)
		}
	}
	for _, k := range sortedPlaces(keep) {
		g.places.Queue(`INSERT INTO places VALUES ($1, $2, $3, $4)
			ON CONFLICT (adapter, chat, thread) DO UPDATE SET session_id = excluded.session_id
			WHERE places.session_id <> excluded.session_id`,
			[]byte(k.adapter), []byte(k.place.Chat), []byte(k.place.Thread), id)
	}
}

type placeKey struct {
	adapter core.AdapterName
	place   core.Place
}

func sortedPlaces(m map[placeKey]bool) []placeKey {
	out := make([]placeKey, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b placeKey) int {
		switch {
		case a.adapter != b.adapter:
			return compare(string(a.adapter), string(b.adapter))
		case a.place.Chat != b.place.Chat:
			return compare(a.place.Chat, b.place.Chat)
		}
		return compare(a.place.Thread, b.place.Thread)
	})
	return out
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// nextSeq returns the next event seq.
func (g *group) nextSeq() uint64 {
	g.lastSeq++
	g.eventsSeen = true
	return g.lastSeq
}

// putEvents adds prepared events to the log (and the journal, for those
// Event.Journaled selects), referencing the inbox message msgID where asked,
// and returns their seqs.
func (g *group) putEvents(evs []preparedEvent, msgID []byte) []uint64 {
	if len(evs) == 0 {
		return nil
	}
	seqs := make([]uint64, len(evs))
	for i, e := range evs {
		seq := g.nextSeq()
		var ref []byte
		if e.ref {
			ref = msgID
		}
		g.events.add(seq, ref, e.body)
		if e.ev.Journaled() {
			g.journal.add(seq, ref, e.body)
		}
		seqs[i] = seq
	}
	return seqs
}

// putCleanup adds ledger rows, a later row for the same Ref replacing an
// earlier one.
func (g *group) putCleanup(rows []ledgerRow) {
	if len(rows) == 0 {
		return
	}
	if g.ledger == nil {
		g.ledger = map[string]ledgerRow{}
	}
	for _, r := range rows {
		g.ledger[string(r.key)] = r
	}
}

// write sends everything the ops produced, the counters, the event log's
// trim and the commit in one batch.
func (g *group) write() error {
	b := &g.places
	var newIDs, updIDs, newData, updData [][]byte
	var newStatus, updStatus []string
	var newStream, updStream []bool
	for _, r := range g.sessions {
		if !r.dirty {
			continue
		}
		if r.created {
			newIDs, newStatus, newStream, newData = append(newIDs, r.id), append(newStatus, string(r.status)), append(newStream, r.streaming), append(newData, r.raw)
		} else {
			updIDs, updStatus, updStream, updData = append(updIDs, r.id), append(updStatus, string(r.status)), append(updStream, r.streaming), append(updData, r.raw)
		}
	}
	if len(newIDs) > 0 {
		b.Queue(`INSERT INTO sessions (id, status, streaming, data)
			SELECT * FROM unnest($1::bytea[], $2::text[], $3::boolean[], $4::bytea[])`, newIDs, newStatus, newStream, newData)
	}
	if len(updIDs) > 0 {
		b.Queue(`UPDATE sessions s SET status = u.status, streaming = u.streaming, data = u.data
			FROM unnest($1::bytea[], $2::text[], $3::boolean[], $4::bytea[]) AS u(id, status, streaming, data)
			WHERE s.id = u.id`, updIDs, updStatus, updStream, updData)
	}
	if len(g.msgs[0]) > 0 {
		b.Queue(`INSERT INTO messages (id, session_id, data) SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[])`,
			g.msgs[0], g.msgs[1], g.msgs[2])
	}
	if len(g.dedups[0]) > 0 {
		b.Queue(`INSERT INTO dedup (key, message_id) SELECT * FROM unnest($1::bytea[], $2::bytea[])`, g.dedups[0], g.dedups[1])
	}
	if len(g.events.seqs) > 0 {
		b.Queue(`INSERT INTO events (seq, message_id, data) SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[])`,
			g.events.seqs, g.events.msgs, g.events.datas)
	}
	if len(g.journal.seqs) > 0 {
		b.Queue(`INSERT INTO journal (seq, message_id, data) SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[])`,
			g.journal.seqs, g.journal.msgs, g.journal.datas)
	}
	if len(g.ledger) > 0 {
		queueLedger(b, g.ledger)
	}
	lastID := g.ids.bytes()
	if g.eventsSeen {
		// Trim once the log holds more than maxEvents+slack, down to
		// maxEvents: one bulk delete every slack events.
		if last, from := g.lastSeq, g.eventsFrom; last-from+1 > g.s.maxEvents+g.s.slack {
			keepFrom := last - g.s.maxEvents + 1
			b.Queue(`DELETE FROM events WHERE seq < $1`, int64(keepFrom))
			g.eventsFrom = keepFrom
		}
	}
	if g.eventsSeen || string(lastID) != string(g.countersIn) {
		b.Queue(`UPDATE counters SET last_id = $1, last_seq = $2, events_from = $3 WHERE id = 1`,
			lastID, int64(g.lastSeq), int64(g.eventsFrom))
	}
	// A COMMIT in a transaction that failed answers ROLLBACK, without an
	// error: the tag is what says it committed.
	b.Queue(`COMMIT`).Exec(func(tag pgconn.CommandTag) error {
		if tag.String() != "COMMIT" {
			return fmt.Errorf("commit answered %q", tag)
		}
		return nil
	})
	return g.conn.SendBatch(g.ctx, b).Close()
}

// queueLedger upserts ledger rows in key order, so that two transactions
// writing the same rows lock them in the same order.
func queueLedger(b *pgx.Batch, rows map[string]ledgerRow) {
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var adapter, chat, thread, message, session, data [][]byte
	var created []time.Time
	for _, k := range keys {
		r := rows[k]
		adapter, chat, thread, message = append(adapter, []byte(r.ref.Adapter)), append(chat, []byte(r.ref.Place.Chat)),
			append(thread, []byte(r.ref.Place.Thread)), append(message, []byte(r.ref.ID))
		session, created, data = append(session, []byte(r.session)), append(created, r.created), append(data, r.val)
	}
	b.Queue(`INSERT INTO ledger (adapter, chat, thread, message, session_id, created, data)
		SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[], $4::bytea[], $5::bytea[], $6::timestamptz[], $7::bytea[])
		ON CONFLICT (adapter, chat, thread, message)
		DO UPDATE SET session_id = excluded.session_id, created = excluded.created, data = excluded.data`,
		adapter, chat, thread, message, session, created, data)
}
