package bolt

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// Event values start with a flag byte saying where the event's message is.
const (
	eventPlain  = 0 // no message, or the message inline in the JSON
	eventMsgRef = 1 // then one length byte and the id of an inbox message
)

// putEvents appends prepared events to the log, referencing the inbox
// message msgID where asked, and returns the assigned seqs. The group trims
// the log once, when it finishes.
func putEvents(w *wtx, evs []store.PreparedEvent, msgID core.MessageID) ([]uint64, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	w.eventsAdded = true
	b := w.Bucket(bucketEvents)
	seqs := make([]uint64, len(evs))
	for i, e := range evs {
		seq, err := b.NextSequence()
		if err != nil {
			return nil, err
		}
		var val []byte
		if e.Ref {
			val = make([]byte, 0, 2+len(msgID)+len(e.Body))
			val = append(val, eventMsgRef, byte(len(msgID)))
			val = append(val, msgID...)
		} else {
			val = make([]byte, 0, 1+len(e.Body))
			val = append(val, eventPlain)
		}
		val = append(val, e.Body...)
		if err := b.Put(seqKey(seq), val); err != nil {
			return nil, err
		}
		if e.Event.Journaled() {
			if err := putJournal(w, seq, val); err != nil {
				return nil, err
			}
		}
		seqs[i] = seq
	}
	return seqs, nil
}

// trimEvents drops the oldest events once the log holds more than
// maxEvents+slack, down to maxEvents, so a bulk delete happens once every
// slack events instead of one delete per append.
func (s *Store) trimEvents(b *bbolt.Bucket) error {
	last := b.Sequence()
	k, _ := b.Cursor().First()
	if k == nil {
		return nil
	}
	first := binary.BigEndian.Uint64(k)
	if last-first+1 <= s.maxEvents+s.slack {
		return nil
	}
	keepFrom := last - s.maxEvents + 1
	// Collect first: deleting while iterating a bbolt cursor skips keys.
	var old [][]byte
	c := b.Cursor()
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < keepFrom; k, _ = c.Next() {
		old = append(old, seqKey(binary.BigEndian.Uint64(k)))
	}
	for _, k := range old {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
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
		return nil, fmt.Errorf("bolt: append events: %w", err)
	}
	var seqs []uint64
	err = s.update(ctx, func(w *wtx) error {
		var err error
		seqs, err = putEvents(w, evs, "")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: append events: %w", err)
	}
	return store.FinishEvents(evs, seqs, nil), nil
}

// EventsSince returns up to limit events with Seq > after, oldest first; a
// limit of zero or less means all. When the log no longer holds after+1
// (and there are newer events) it returns no events and an error wrapping
// core.ErrEventsTruncated: the caller has missed events and must resync from
// current state.
func (s *Store) EventsSince(ctx context.Context, after uint64, limit int) ([]core.Event, error) {
	var out []core.Event
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketEvents)
		last := b.Sequence()
		if after >= last {
			return nil
		}
		c := b.Cursor()
		k, _ := c.First()
		if k == nil || binary.BigEndian.Uint64(k) > after+1 {
			oldest := last + 1
			if k != nil {
				oldest = binary.BigEndian.Uint64(k)
			}
			return fmt.Errorf("after %d, oldest kept is %d: %w", after, oldest, core.ErrEventsTruncated)
		}
		inbox := tx.Bucket(bucketInbox)
		for k, v := c.Seek(seqKey(after + 1)); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			e, err := decodeEvent(inbox, k, v)
			if err != nil {
				return fmt.Errorf("event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: events since %d: %w", after, err)
	}
	return out, nil
}

// decodeEvent reads an event value, resolving a message reference.
func decodeEvent(inbox *bbolt.Bucket, k, v []byte) (core.Event, error) {
	var e core.Event
	if len(v) == 0 {
		return e, errors.New("empty value")
	}
	var msgID []byte
	switch v[0] {
	case eventPlain:
		v = v[1:]
	case eventMsgRef:
		if len(v) < 2 || len(v) < 2+int(v[1]) {
			return e, errors.New("short message reference")
		}
		msgID, v = v[2:2+int(v[1])], v[2+int(v[1]):]
	default:
		return e, fmt.Errorf("unknown event flag %d", v[0])
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return e, err
	}
	e.Seq = binary.BigEndian.Uint64(k)
	if msgID != nil {
		mv := inbox.Get(msgID)
		if mv == nil {
			return e, fmt.Errorf("message %s is missing", msgID)
		}
		m, err := decodeMessage(msgID, mv)
		if err != nil {
			return e, err
		}
		e.Message = &m
	}
	return e, nil
}

// LastEventSeq is the Seq of the newest event (0 when none).
func (s *Store) LastEventSeq(ctx context.Context) (uint64, error) {
	var last uint64
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		last = tx.Bucket(bucketEvents).Sequence()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: last event seq: %w", err)
	}
	return last, nil
}
