package bolt

import (
	"bytes"
	"cmp"
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

// CreateSession stores a new session and its events. An empty ID gets a new
// id of the store's clock (core.SessionIDs), zero Created and Updated get now and an empty Status
// becomes idle. It returns an error wrapping core.ErrExists when the id is
// taken. A binding whose place another session is bound at takes that place
// over in the place index: the newest binding wins.
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
		return core.Session{}, nil, fmt.Errorf("bolt: create session: %w", err)
	}
	if err := checkPlaces(sess.Bindings); err != nil {
		return core.Session{}, nil, fmt.Errorf("bolt: create session: %w", err)
	}
	evs, err := store.PrepareEvents(now, sess.ID, events, false)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("bolt: create session: %w", err)
	}
	var (
		exists bool
		seqs   []uint64
	)
	err = s.update(ctx, func(w *wtx) error {
		exists, seqs = false, nil
		b := w.Bucket(bucketSessions)
		if b.Get([]byte(sess.ID)) != nil {
			exists = true
			return nil
		}
		if err := writeSession(w.Tx, sess.ID, nil, sess.Bindings, val); err != nil {
			return err
		}
		var err error
		seqs, err = putEvents(w, evs, "")
		return err
	})
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("bolt: create session %s: %w", sess.ID, err)
	}
	if exists {
		return core.Session{}, nil, fmt.Errorf("bolt: create session %s: %w", sess.ID, core.ErrExists)
	}
	return sess, store.FinishEvents(evs, seqs, nil), nil
}

// Session returns one session, or an error wrapping core.ErrNotFound.
func (s *Store) Session(ctx context.Context, id core.SessionID) (core.Session, error) {
	var sess core.Session
	found := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketSessions).Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		var err error
		sess, err = s.cache.decode(id, v)
		return err
	})
	if err != nil {
		return core.Session{}, fmt.Errorf("bolt: session %s: %w", id, err)
	}
	if !found {
		return core.Session{}, fmt.Errorf("bolt: session %s: %w", id, core.ErrNotFound)
	}
	return sess, nil
}

// Sessions returns all sessions, oldest first by Created, then by id. It
// decodes (and caches) every session: what serves clients or runs at
// start-up pages through SessionsPage instead.
func (s *Store) Sessions(ctx context.Context) ([]core.Session, error) {
	var out []core.Session
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
			sess, err := s.cache.decode(core.SessionID(k), v)
			if err != nil {
				return fmt.Errorf("session %s: %w", k, err)
			}
			out = append(out, sess)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: sessions: %w", err)
	}
	// Keys are time-ordered ids already; sorting by Created as well keeps
	// "oldest first" true for sessions created with ids of their own.
	slices.SortStableFunc(out, func(a, b core.Session) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// SessionAt returns the session bound at place on adapter, or an error
// wrapping core.ErrNotFound.
func (s *Store) SessionAt(ctx context.Context, adapter core.AdapterName, place core.Place) (core.Session, error) {
	var sess core.Session
	found := false
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		id := tx.Bucket(bucketPlaces).Get(placeKey(adapter, place))
		if id == nil {
			return nil
		}
		v := tx.Bucket(bucketSessions).Get(id)
		if v == nil {
			return nil
		}
		found = true
		var err error
		sess, err = s.cache.decode(core.SessionID(id), v)
		return err
	})
	if err != nil {
		return core.Session{}, fmt.Errorf("bolt: session at %s %q/%q: %w", adapter, place.Chat, place.Thread, err)
	}
	if !found {
		return core.Session{}, fmt.Errorf("bolt: session at %s %q/%q: %w", adapter, place.Chat, place.Thread, core.ErrNotFound)
	}
	return sess, nil
}

// UpdateSession applies fn to a fresh copy of the stored session and stores
// the result with events in one transaction. fn runs inside the committer,
// may run more than once and must not call the Store. An
// error from fn aborts the update (nothing is written) and is returned
// wrapped. fn cannot change the id; when fn changes something but leaves
// Updated alone, Updated is set to now; when it changes nothing, only the
// events are written. Missing sessions give an error wrapping
// core.ErrNotFound.
func (s *Store) UpdateSession(ctx context.Context, id core.SessionID, fn func(*core.Session) error, events ...core.Event) (core.Session, []core.Event, error) {
	now := s.clock()
	evs, err := store.PrepareEvents(now, id, events, false)
	if err != nil {
		return core.Session{}, nil, fmt.Errorf("bolt: update session %s: %w", id, err)
	}
	var (
		sess    core.Session
		written []byte
		found   bool
		fnErr   error
		seqs    []uint64
	)
	err = s.update(ctx, func(w *wtx) error {
		sess, written, found, fnErr, seqs = core.Session{}, nil, false, nil, nil
		b := w.Bucket(bucketSessions)
		v := b.Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		// A fresh copy each run: fn shares nothing (Bindings included)
		// with an earlier run, the cache or the stored bytes.
		cur, err := s.cache.decode(id, v)
		if err != nil {
			return err
		}
		old := maps.Clone(cur.Bindings)
		updated := cur.Updated
		if err := fn(&cur); err != nil {
			fnErr = err
			return nil
		}
		val, err := encodeSession(id, &cur, v, updated, now)
		if err != nil {
			fnErr = err // a session fn made unstorable is the caller's error
			return nil
		}
		if val != nil {
			if err := writeSession(w.Tx, id, old, cur.Bindings, val); err != nil {
				return err
			}
		}
		sess, written = cur, val
		seqs, err = putEvents(w, evs, "")
		return err
	})
	switch {
	case err != nil:
		return core.Session{}, nil, fmt.Errorf("bolt: update session %s: %w", id, err)
	case !found:
		return core.Session{}, nil, fmt.Errorf("bolt: update session %s: %w", id, core.ErrNotFound)
	case fnErr != nil:
		return core.Session{}, nil, fmt.Errorf("bolt: update session %s: %w", id, fnErr)
	}
	if written != nil {
		s.cache.put(id, written, sess)
	}
	return sess, store.FinishEvents(evs, seqs, nil), nil
}

// encodeSession finishes a session that a caller's function changed from
// its stored bytes: the id stays, and when anything changed Updated moves to
// now unless the function set it. It returns nil when there is nothing to
// write. Its errors are the caller's: it writes nothing.
func encodeSession(id core.SessionID, cur *core.Session, stored []byte, updated, now time.Time) ([]byte, error) {
	cur.ID = id
	if err := checkPlaces(cur.Bindings); err != nil {
		return nil, err
	}
	val, err := json.Marshal(cur)
	if err != nil || bytes.Equal(val, stored) {
		return nil, err
	}
	if cur.Updated.Equal(updated) {
		cur.Updated = now
		return json.Marshal(cur)
	}
	return val, nil
}

// writeSession stores an encoded session and moves its place index entries
// from the old bindings to cur.
func writeSession(tx *bbolt.Tx, id core.SessionID, old, cur map[core.AdapterName]core.Binding, val []byte) error {
	if err := tx.Bucket(bucketSessions).Put([]byte(id), val); err != nil {
		return err
	}
	return syncPlaces(tx, id, old, cur)
}

// checkPlaces refuses bindings whose place key bbolt could not store.
func checkPlaces(bindings map[core.AdapterName]core.Binding) error {
	for name, b := range bindings {
		if err := checkKey("binding place", placeKey(name, b.Place)); err != nil {
			return err
		}
	}
	return nil
}

// syncPlaces makes the place index follow a session's bindings changing from
// old to cur. A place is only unindexed while it still points at this
// session: another session may have been bound there since.
func syncPlaces(tx *bbolt.Tx, id core.SessionID, old, cur map[core.AdapterName]core.Binding) error {
	b := tx.Bucket(bucketPlaces)
	keep := make(map[string]bool, len(cur))
	for name, bind := range cur {
		if !bind.Place.IsZero() {
			keep[string(placeKey(name, bind.Place))] = true
		}
	}
	for name, bind := range old {
		if bind.Place.IsZero() {
			continue
		}
		k := placeKey(name, bind.Place)
		if keep[string(k)] {
			continue
		}
		if string(b.Get(k)) == string(id) {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
	}
	for k := range keep {
		if string(b.Get([]byte(k))) == string(id) {
			continue
		}
		if err := b.Put([]byte(k), []byte(id)); err != nil {
			return err
		}
	}
	return nil
}

// cloneSession copies s so the copy shares no map with it.
func cloneSession(s core.Session) core.Session {
	s.Bindings = maps.Clone(s.Bindings)
	return s
}
