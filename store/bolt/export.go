package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// Export: the whole file read out for parley migrate (store.Copy), bucket
// by bucket. The indexes (places, inbox_by_session, inbox_recent,
// ledger_by_session) are not records of their own: a target builds its
// own from the sessions, messages and ledger rows.

var _ store.Exporter = (*Store)(nil)

// kindBucket is the bucket holding each kind's records.
var kindBucket = map[store.Kind][]byte{
	store.KindSessions:   bucketSessions,
	store.KindPlaces:     bucketPlaces,
	store.KindMessages:   bucketInbox,
	store.KindDedup:      bucketDedup,
	store.KindEvents:     bucketEvents,
	store.KindJournal:    bucketJournal,
	store.KindLedger:     bucketLedger,
	store.KindCursors:    bucketCursors,
	store.KindPairings:   bucketPairing,
	store.KindAdmissions: bucketAdmitted,
}

// Counters implements store.Exporter.
func (s *Store) Counters(ctx context.Context) (store.Counters, error) {
	var c store.Counters
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		c.LastID = bytes.Clone(tx.Bucket(bucketMeta).Get(keyLastID))
		c.LastSeq = tx.Bucket(bucketEvents).Sequence()
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("bolt: counters: %w", err)
	}
	return c, nil
}

// Count implements store.Exporter.
func (s *Store) Count(ctx context.Context, kind store.Kind) (int, error) {
	name, ok := kindBucket[kind]
	if !ok {
		return 0, fmt.Errorf("bolt: count: unknown kind %q", kind)
	}
	n := 0
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		n = tx.Bucket(name).Stats().KeyN
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bolt: count %s: %w", kind, err)
	}
	return n, nil
}

// Export implements store.Exporter.
func (s *Store) Export(ctx context.Context, kind store.Kind, fn func(store.Record) error) error {
	name, ok := kindBucket[kind]
	if !ok {
		return fmt.Errorf("bolt: export: unknown kind %q", kind)
	}
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		done := tx.Bucket(bucketJournalDone)
		return tx.Bucket(name).ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			r, err := exportRecord(kind, k, v, done)
			if err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
			return fn(r)
		})
	})
	if err != nil {
		return fmt.Errorf("bolt: export %s: %w", kind, err)
	}
	return nil
}

// exportRecord decodes one record of kind stored under k.
func exportRecord(kind store.Kind, k, v []byte, done *bbolt.Bucket) (store.Record, error) {
	var r store.Record
	var err error
	switch kind {
	case store.KindSessions:
		err = json.Unmarshal(v, &r.Session)
	case store.KindPlaces:
		var parts []string
		parts, err = splitParts(k, 3)
		if err == nil {
			r.Adapter, r.Place, r.Value = core.AdapterName(parts[0]), core.Place{Chat: parts[1], Thread: parts[2]}, string(v)
		}
	case store.KindMessages:
		r.Message, err = decodeMessage(k, v)
	case store.KindDedup, store.KindCursors:
		r.Key, r.Value = string(k), string(v)
	case store.KindEvents, store.KindJournal:
		r.Event, r.Ref, err = exportEvent(k, v)
		if kind == store.KindJournal {
			c := done.Cursor()
			for dk, _ := c.Seek(k); dk != nil && bytes.HasPrefix(dk, k); dk, _ = c.Next() {
				r.Done = append(r.Done, string(dk[len(k):]))
			}
		}
	case store.KindLedger:
		err = json.Unmarshal(v, &r.Cleanup)
	case store.KindPairings:
		err = json.Unmarshal(v, &r.Pairing)
	case store.KindAdmissions:
		err = json.Unmarshal(v, &r.Admission)
	}
	return r, err
}

// splitParts splits a key made of n parts, each prefixed with its length
// (appendPart).
func splitParts(k []byte, n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		l, w := binary.Uvarint(k)
		if w <= 0 || uint64(len(k)-w) < l {
			return nil, errors.New("malformed key")
		}
		out = append(out, string(k[w:w+int(l)]))
		k = k[w+int(l):]
	}
	if len(k) != 0 {
		return nil, errors.New("malformed key")
	}
	return out, nil
}

// exportEvent decodes a stored event, leaving a referenced message as its
// id rather than reading it from the inbox.
func exportEvent(k, v []byte) (core.Event, core.MessageID, error) {
	var e core.Event
	if len(v) == 0 || len(k) != 8 {
		return e, "", errors.New("empty value or bad key")
	}
	var ref []byte
	switch v[0] {
	case eventPlain:
		v = v[1:]
	case eventMsgRef:
		if len(v) < 2 || len(v) < 2+int(v[1]) {
			return e, "", errors.New("short message reference")
		}
		ref, v = v[2:2+int(v[1])], v[2+int(v[1]):]
	default:
		return e, "", fmt.Errorf("unknown event flag %d", v[0])
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return e, "", err
	}
	e.Seq = binary.BigEndian.Uint64(k)
	return e, core.MessageID(ref), nil
}
