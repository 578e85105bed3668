package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// appendOp is one Append: what is prepared outside the transaction, and
// what its last run inside found. Its apply may run more than once and
// starts by resetting the findings.
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
	sessHit   *cachedSession // the session as stored, when update is nil and it was cached
	sessRaw   []byte         // the session as stored, when update is nil otherwise
	sessVal   []byte         // the session as written by update
	sess      core.Session   // the session after update
	seqs      []uint64
	dup       bool
	dupID     []byte
	dupMsg    []byte
}

// Append durably appends one inbox message with its dedup key, session
// update, events and ledger rows in one transaction (see core.Append). An
// error wrapping core.ErrNotFound means the session does not exist; then
// nothing was written. A duplicate DedupKey writes nothing and returns the
// first message and the current session with Duplicate set.
//
// Update runs inside the committer on a fresh copy of the session and must
// not call the Store. When it changes the session but leaves Updated alone,
// Updated is set to now; when it changes nothing, the session is not
// written. Events and ledger rows without a Session get the message's;
// ledger rows without Created get now.
func (s *Store) Append(ctx context.Context, a core.Append) (core.AppendResult, error) {
	op, err := prepareAppend(s.clock(), a)
	if err != nil {
		return core.AppendResult{}, fmt.Errorf("bolt: append: %w", err)
	}
	if err := s.update(ctx, op.apply); err != nil {
		return core.AppendResult{}, fmt.Errorf("bolt: append: %w", err)
	}
	return op.result(&s.cache)
}

// prepareAppend does all the work of an Append that does not need the
// transaction, so that the one committer does as little as possible.
func prepareAppend(now time.Time, a core.Append) (*appendOp, error) {
	op := &appendOp{msg: store.CloneMessage(a.Message), update: a.Update, now: now}
	if op.msg.Session == "" {
		return nil, fmt.Errorf("message has no session: %w", core.ErrNotFound)
	}
	if op.msg.Time.IsZero() {
		op.msg.Time = now
	}
	// The key is the id; the stored JSON leaves it empty so that the body
	// can be encoded here, before the id exists.
	op.msg.ID = ""
	var err error
	if op.body, err = json.Marshal(op.msg); err != nil {
		return nil, err
	}
	op.dedupKey = []byte(a.DedupKey)
	if err := checkKey("dedup key", op.dedupKey); err != nil {
		return nil, err
	}
	if op.evs, err = store.PrepareEvents(now, op.msg.Session, a.Events, true); err != nil {
		return nil, err
	}
	if op.rows, err = prepareCleanup(now, op.msg.Session, a.Cleanup); err != nil {
		return nil, err
	}
	op.sid = []byte(op.msg.Session)
	return op, nil
}

// apply is the Append's part of a group transaction.
func (op *appendOp) apply(w *wtx) error {
	op.id, op.notFound, op.updateErr, op.seqs = "", false, nil, nil
	op.sessHit, op.sessRaw, op.sessVal, op.sess = nil, nil, nil, core.Session{}
	op.dup, op.dupID, op.dupMsg = false, nil, nil
	dedup := w.Bucket(bucketDedup)
	inbox := w.Bucket(bucketInbox)
	sessions := w.Bucket(bucketSessions)

	// Everything that can turn the append down comes before the first
	// write, so that it can return nil and leave its group's transaction
	// as it found it.
	if len(op.dedupKey) > 0 {
		if id := dedup.Get(op.dedupKey); id != nil {
			return op.duplicate(id, inbox, sessions)
		}
	}
	stored := sessions.Get(op.sid)
	if stored == nil {
		op.notFound = true
		return nil
	}
	var oldBindings map[core.AdapterName]core.Binding
	if op.update != nil {
		var err error
		if op.sess, err = w.s.cache.decode(op.msg.Session, stored); err != nil {
			return err
		}
		oldBindings = maps.Clone(op.sess.Bindings)
		updated := op.sess.Updated
		op.update(&op.sess)
		if op.sessVal, err = encodeSession(op.msg.Session, &op.sess, stored, updated, op.now); err != nil {
			op.updateErr = err
			return nil
		}
	} else if op.sessHit = w.s.cache.match(op.msg.Session, stored); op.sessHit == nil {
		op.sessRaw = bytes.Clone(stored)
	}

	id, err := w.nextID(op.now)
	if err != nil {
		return err
	}
	op.id = id
	if err := inbox.Put([]byte(id), op.body); err != nil {
		return err
	}
	recent := w.Bucket(bucketRecent)
	if _, err := recent.NextSequence(); err != nil {
		return err
	}
	if err := recent.Put([]byte(id), op.sid); err != nil {
		return err
	}
	w.recentAdded = true
	if len(op.dedupKey) > 0 {
		if err := dedup.Put(op.dedupKey, []byte(id)); err != nil {
			return err
		}
	}
	if op.sessVal != nil {
		if err := writeSession(w.Tx, op.msg.Session, oldBindings, op.sess.Bindings, op.sessVal); err != nil {
			return err
		}
	}
	if op.seqs, err = putEvents(w, op.evs, id); err != nil {
		return err
	}
	return putCleanup(w.Tx, op.rows)
}

// duplicate records the message stored under an already seen dedup key and
// its session as they are now.
func (op *appendOp) duplicate(id []byte, inbox, sessions *bbolt.Bucket) error {
	op.dup = true
	op.dupID = bytes.Clone(id)
	v := inbox.Get(id)
	if v == nil {
		return fmt.Errorf("dedup key points at missing message %s", id)
	}
	op.dupMsg = bytes.Clone(v)
	var m struct {
		Session core.SessionID `json:"session_id"`
	}
	if err := json.Unmarshal(v, &m); err != nil {
		return fmt.Errorf("message %s: %w", id, err)
	}
	op.sessRaw = bytes.Clone(sessions.Get([]byte(m.Session)))
	return nil
}

// result turns what the committed run found into the caller's result. The
// session is decoded here rather than in the transaction: the committer is
// the one serial resource, callers run in parallel.
func (op *appendOp) result(cache *sessionCache) (core.AppendResult, error) {
	switch {
	case op.notFound:
		return core.AppendResult{}, fmt.Errorf("bolt: append: session %s: %w", op.msg.Session, core.ErrNotFound)
	case op.updateErr != nil:
		return core.AppendResult{}, fmt.Errorf("bolt: append: session %s: %w", op.msg.Session, op.updateErr)
	}
	var res core.AppendResult
	if op.dup {
		m, err := decodeMessage(op.dupID, op.dupMsg)
		if err != nil {
			return core.AppendResult{}, fmt.Errorf("bolt: append: %w", err)
		}
		res = core.AppendResult{Message: m, Duplicate: true}
	} else {
		op.msg.ID = op.id
		res = core.AppendResult{Message: op.msg, Events: store.FinishEvents(op.evs, op.seqs, &op.msg)}
	}
	switch {
	case op.sessHit != nil:
		res.Session = cloneSession(op.sessHit.sess)
	case op.sessRaw != nil:
		var err error
		if res.Session, err = cache.decode(res.Message.Session, op.sessRaw); err != nil {
			return core.AppendResult{}, fmt.Errorf("bolt: append: session %s: %w", res.Message.Session, err)
		}
	default:
		res.Session = op.sess
		if op.sessVal != nil {
			cache.put(op.msg.Session, op.sessVal, op.sess)
		}
	}
	return res, nil
}

// Inbox returns up to limit messages with ids strictly after after (all when
// after is empty), oldest first; a limit of zero or less means no limit. An
// empty session means every session. An unknown session has no messages.
func (s *Store) Inbox(ctx context.Context, session core.SessionID, after core.MessageID, limit int) ([]core.Message, error) {
	var out []core.Message
	full := func() bool { return limit > 0 && len(out) >= limit }
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		add := func(id []byte) error {
			v := inbox.Get(id)
			if v == nil {
				return fmt.Errorf("indexed message %s is missing", id)
			}
			m, err := decodeMessage(id, v)
			if err != nil {
				return err
			}
			out = append(out, m)
			return nil
		}
		if session == "" {
			c := inbox.Cursor()
			k, v := c.Seek([]byte(after))
			if after != "" && string(k) == string(after) {
				k, v = c.Next()
			}
			for ; k != nil && !full(); k, v = c.Next() {
				m, err := decodeMessage(k, v)
				if err != nil {
					return err
				}
				out = append(out, m)
			}
			return nil
		}
		// Folded ids first: every id still in inbox_recent is newer.
		prefix := sessionPrefix(session)
		start := append(prefix[:len(prefix):len(prefix)], after...)
		c := tx.Bucket(bucketBySess).Cursor()
		k, _ := c.Seek(start)
		if after != "" && bytes.Equal(k, start) {
			k, _ = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && !full(); k, _ = c.Next() {
			if err := add(k[len(prefix):]); err != nil {
				return err
			}
		}
		c = tx.Bucket(bucketRecent).Cursor()
		k, v := c.Seek([]byte(after))
		if after != "" && string(k) == string(after) {
			k, v = c.Next()
		}
		for ; k != nil && !full(); k, v = c.Next() {
			if string(v) != string(session) {
				continue
			}
			if err := add(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: inbox %s after %s: %w", session, after, err)
	}
	return out, nil
}

// defaultFoldAt is how many appends inbox_recent collects before they are
// folded into inbox_by_session. Appending to 64 sessions' ranges of
// inbox_by_session in every group transaction dirtied a leaf page per
// session and made each append cost twice as much; folding sorted runs of
// ~1024 touches each session's last leaf once per fold instead, while a
// per-session read scans at most a fold's worth of small recent entries.
const defaultFoldAt = 1024

// foldRecent moves every entry of inbox_recent into inbox_by_session, in key
// order so that each session's range is visited once, and empties
// inbox_recent by replacing the bucket, which frees its pages in one go.
func foldRecent(tx *bbolt.Tx) error {
	var keys [][]byte
	err := tx.Bucket(bucketRecent).ForEach(func(id, session []byte) error {
		k := appendPart(make([]byte, 0, 1+len(session)+len(id)), string(session))
		keys = append(keys, append(k, id...))
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(keys, bytes.Compare)
	by := tx.Bucket(bucketBySess)
	for _, k := range keys {
		if err := by.Put(k, nil); err != nil {
			return err
		}
	}
	if err := tx.DeleteBucket(bucketRecent); err != nil {
		return err
	}
	b, err := tx.CreateBucket(bucketRecent)
	if err != nil {
		return err
	}
	b.FillPercent = 0.9
	return nil
}

// decodeMessage reads an inbox value, whose id is its key.
func decodeMessage(id, v []byte) (core.Message, error) {
	var m core.Message
	if err := json.Unmarshal(v, &m); err != nil {
		return core.Message{}, fmt.Errorf("message %s: %w", id, err)
	}
	m.ID = core.MessageID(id)
	return m, nil
}

// Deduped implements core.Store.
func (s *Store) Deduped(ctx context.Context, key string) (core.Message, bool, error) {
	var (
		m     core.Message
		found bool
	)
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		id := tx.Bucket(bucketDedup).Get([]byte(key))
		if id == nil {
			return nil
		}
		v := tx.Bucket(bucketInbox).Get(id)
		if v == nil {
			return fmt.Errorf("dedup key points at missing message %s", id)
		}
		var err error
		m, err = decodeMessage(id, v)
		found = err == nil
		return err
	})
	if err != nil {
		return core.Message{}, false, fmt.Errorf("bolt: deduped: %w", err)
	}
	return m, found, nil
}

// InboxTail implements core.Store: it walks the inbox (or the session's
// recent entries, then its folded index) from the end.
func (s *Store) InboxTail(ctx context.Context, session core.SessionID, n int) ([]core.Message, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []core.Message
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		inbox := tx.Bucket(bucketInbox)
		var ids [][]byte // newest first
		if session == "" {
			c := inbox.Cursor()
			for k, _ := c.Last(); k != nil && len(ids) < n; k, _ = c.Prev() {
				ids = append(ids, k)
			}
		} else {
			// Every id still in inbox_recent is newer than the folded ones.
			c := tx.Bucket(bucketRecent).Cursor()
			for k, v := c.Last(); k != nil && len(ids) < n; k, v = c.Prev() {
				if string(v) == string(session) {
					ids = append(ids, k)
				}
			}
			prefix := sessionPrefix(session)
			end := append(prefix[:len(prefix):len(prefix)], 0xFF) // past every id: ids are base32
			c = tx.Bucket(bucketBySess).Cursor()
			k, _ := c.Seek(end)
			if k == nil {
				k, _ = c.Last()
			} else {
				k, _ = c.Prev()
			}
			for ; k != nil && bytes.HasPrefix(k, prefix) && len(ids) < n; k, _ = c.Prev() {
				ids = append(ids, k[len(prefix):])
			}
		}
		out = make([]core.Message, 0, len(ids))
		for i := len(ids) - 1; i >= 0; i-- {
			v := inbox.Get(ids[i])
			if v == nil {
				return fmt.Errorf("indexed message %s is missing", ids[i])
			}
			m, err := decodeMessage(ids[i], v)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: inbox tail %s: %w", session, err)
	}
	return out, nil
}
