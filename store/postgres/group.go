package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

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
	msgs       messageRows
	dedups     [2][][]byte // keys, message ids
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

// messageRows are the inbox rows of a group, as columns.
type messageRows struct {
	ids, sessions, datas [][]byte
}

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
func (g *group) putEvents(evs []store.PreparedEvent, msgID []byte) []uint64 {
	if len(evs) == 0 {
		return nil
	}
	seqs := make([]uint64, len(evs))
	for i, e := range evs {
		seq := g.nextSeq()
		var ref []byte
		if e.Ref {
			ref = msgID
		}
		g.events.add(seq, ref, e.Body)
		if e.Event.Journaled() {
			g.journal.add(seq, ref, e.Body)
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
	if len(g.msgs.ids) > 0 {
		b.Queue(`INSERT INTO messages (id, session_id, data) SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::bytea[])`,
			g.msgs.ids, g.msgs.sessions, g.msgs.datas)
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
	if g.eventsSeen {
		queueNotify(b, g.lastSeq) // delivered at commit (notify.go)
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
