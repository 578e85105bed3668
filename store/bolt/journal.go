package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// The delivery journal: putEvents copies every event that Event.Journaled
// selects into the journal bucket, in the event's own transaction, so an
// accepted assistant message is durable before anyone is told it was
// accepted. ConfirmDelivery marks its operations done one by one in
// journal_done and drops the whole row with the last one. The journal keeps
// its own copy of the event because the event log is trimmed by count, and
// an outage may outlast many events.

// putJournal journals the event just logged under seq, with the same value
// the event log got (so a message reference resolves the same way).
func putJournal(w *wtx, seq uint64, val []byte) error {
	return w.Bucket(bucketJournal).Put(seqKey(seq), val)
}

// Deliveries implements core.Store.
func (s *Store) Deliveries(ctx context.Context, after uint64, limit int) ([]core.Delivery, error) {
	var out []core.Delivery
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		inbox, done := tx.Bucket(bucketInbox), tx.Bucket(bucketJournalDone).Cursor()
		c := tx.Bucket(bucketJournal).Cursor()
		for k, v := c.Seek(seqKey(after + 1)); k != nil && (limit <= 0 || len(out) < limit); k, v = c.Next() {
			e, err := decodeEvent(inbox, k, v)
			if err != nil {
				return fmt.Errorf("journaled event %d: %w", binary.BigEndian.Uint64(k), err)
			}
			d := core.Delivery{Event: e}
			for dk, _ := done.Seek(k); dk != nil && bytes.HasPrefix(dk, k); dk, _ = done.Next() {
				d.Done = append(d.Done, string(dk[len(k):]))
			}
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: deliveries: %w", err)
	}
	return out, nil
}

// ConfirmDelivery implements core.Store.
func (s *Store) ConfirmDelivery(ctx context.Context, seq uint64, key string, last bool) error {
	k := seqKey(seq)
	err := s.update(ctx, func(w *wtx) error {
		j, done := w.Bucket(bucketJournal), w.Bucket(bucketJournalDone)
		if j.Get(k) == nil {
			return nil // finished already
		}
		if !last {
			return done.Put(append(k[:len(k):len(k)], key...), nil)
		}
		var keys [][]byte
		c := done.Cursor()
		for dk, _ := c.Seek(k); dk != nil && bytes.HasPrefix(dk, k); dk, _ = c.Next() {
			keys = append(keys, bytes.Clone(dk))
		}
		for _, dk := range keys {
			if err := done.Delete(dk); err != nil {
				return err
			}
		}
		return j.Delete(k)
	})
	if err != nil {
		return fmt.Errorf("bolt: confirm delivery %d: %w", seq, err)
	}
	return nil
}
