package bolt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// DefaultPruneBatch is store.DefaultPruneBatch: a few milliseconds of the
// committer, so appends queued behind a prune transaction wait no longer
// than behind a busy group.
const DefaultPruneBatch = store.DefaultPruneBatch

// pruneScan is how many keys one read transaction looks at, so that a long
// bucket with little to prune does not pin one read transaction (and the
// pages it sees) for the whole walk.
const pruneScan = 8192

// PruneOptions say what Prune removes (see store.PruneOptions).
type PruneOptions = store.PruneOptions

// PruneStats counts what Prune removed.
type PruneStats = store.PruneStats

// Prune removes what is only kept to recognise a repeat or to finish a
// deletion, once it is older than opts.Before:
//
//   - dedup keys, by the time of the message they point at (its id's time):
//     a platform redelivery is recognised as long as its key is kept, so
//     Before must lie further back than any platform redelivers;
//   - reservation cursors (opts.CursorPrefixes), by the time of the id
//     they hold;
//   - cleanup-ledger rows, by their Created time, whether or not their
//     deletion is due: a message that waited that long for its rule (or a
//     deletion that kept failing) is left on the platform, where most
//     platforms no longer let bots delete it anyway (Telegram: 48 hours).
//
// Messages, sessions, the event log (bounded by Options.MaxEvents) and the
// delivery journal are never pruned: the journal holds what was accepted
// and not yet delivered, whatever its age.
//
// Prune walks each bucket in read transactions of a few thousand keys and
// deletes what it found in write transactions of at most opts.Batch
// records, each through the committer like any write, so appends never wait
// behind a long transaction. A record changed between the read and the
// delete (a ledger row replaced) is left alone. It returns what it removed
// so far when ctx ends.
func (s *Store) Prune(ctx context.Context, opts PruneOptions) (PruneStats, error) {
	if opts.Batch <= 0 {
		opts.Batch = DefaultPruneBatch
	}
	cut := opts.Before.UnixMilli()
	var st PruneStats
	var err error
	st.Dedup, err = s.pruneBucket(ctx, bucketDedup, opts.Batch, nil, func(_, v []byte) bool {
		ms, ok := core.IDMillis(string(v))
		return ok && ms < cut
	})
	if err != nil {
		return st, fmt.Errorf("bolt: prune dedup keys: %w", err)
	}
	if len(opts.CursorPrefixes) > 0 {
		st.Cursors, err = s.pruneBucket(ctx, bucketCursors, opts.Batch, nil, func(k, v []byte) bool {
			for _, p := range opts.CursorPrefixes {
				if p != "" && strings.HasPrefix(string(k), p) {
					ms, ok := core.IDMillis(string(v))
					return ok && ms < cut
				}
			}
			return false
		})
		if err != nil {
			return st, fmt.Errorf("bolt: prune cursors: %w", err)
		}
	}
	st.Ledger, err = s.pruneBucket(ctx, bucketLedger, opts.Batch, deleteCleanup, func(_, v []byte) bool {
		var row struct {
			Created time.Time `json:"created"`
		}
		// A row that does not decode is left for Cleanup to report.
		return json.Unmarshal(v, &row) == nil && !row.Created.IsZero() && row.Created.UnixMilli() < cut
	})
	if err != nil {
		return st, fmt.Errorf("bolt: prune cleanup ledger: %w", err)
	}
	return st, nil
}

// pruneBucket deletes the records of bucket for which old holds, batch at a
// time, and returns how many it deleted. del, when set, deletes a record
// with whatever indexes it.
func (s *Store) pruneBucket(ctx context.Context, bucket []byte, batch int, del func(tx *bbolt.Tx, k, v []byte) error,
	old func(k, v []byte) bool) (int, error) {
	type kv struct{ k, v []byte }
	var (
		from    []byte // the next read starts at the first key after it
		removed int
	)
	for {
		var found []kv
		more := false
		err := s.view(ctx, func(tx *bbolt.Tx) error {
			c := tx.Bucket(bucket).Cursor()
			var k, v []byte
			if from == nil {
				k, v = c.First()
			} else if k, v = c.Seek(from); bytes.Equal(k, from) {
				k, v = c.Next()
			}
			for n := 0; k != nil; k, v = c.Next() {
				if n == pruneScan || len(found) == batch {
					more = true
					break
				}
				n++
				from = bytes.Clone(k)
				if old(k, v) {
					found = append(found, kv{bytes.Clone(k), bytes.Clone(v)})
				}
			}
			return nil
		})
		if err != nil {
			return removed, err
		}
		if len(found) > 0 {
			n := 0
			err := s.update(ctx, func(w *wtx) error {
				n = 0
				b := w.Bucket(bucket)
				for _, r := range found {
					// Only as it was read: a row replaced since is
					// someone's newer record.
					if !bytes.Equal(b.Get(r.k), r.v) {
						continue
					}
					var err error
					if del != nil {
						err = del(w.Tx, r.k, r.v)
					} else {
						err = b.Delete(r.k)
					}
					if err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return removed, err
			}
			removed += n
		}
		if !more {
			return removed, nil
		}
		if err := ctx.Err(); err != nil {
			return removed, err
		}
	}
}
