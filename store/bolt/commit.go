package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"

	bbolt "go.etcd.io/bbolt"
)

// maxGroup caps how many writes share one transaction. Groups are as large
// as the number of writers that queued during the previous commit, so the
// cap only matters under extreme load, where it bounds the latency of the
// first writer of a group and the memory of one transaction's dirty pages.
// At several microseconds of work per append, 1024 appends are a few
// milliseconds of transaction next to a fsync of ~130µs.
const maxGroup = 1024

// writeFunc is one caller's part of a group transaction. It may run more than
// once (when another function of its group fails) and must reset whatever
// it captured each time. It returns an error only for failures that must
// roll back its writes; outcomes such as "not found" are captured and it
// returns nil without writing.
type writeFunc func(*wtx) error

// writeReq is one write waiting for the committer.
type writeReq struct {
	fn   writeFunc
	done chan error
}

// wtx is a write transaction shared by a group of writes, with the state
// they share: the last message id, read from meta once and written back
// once, and whether the event log grew and may need a trim. Both live and
// die with the bbolt transaction, so a rolled back group leaves no trace.
type wtx struct {
	*bbolt.Tx
	s *Store

	ids       idState
	idsLoaded bool
	idsDirty  bool

	eventsAdded bool
	recentAdded bool
}

func (s *Store) newWtx(tx *bbolt.Tx) *wtx {
	// The inbox and the event log only ever append, and each session's
	// index appends at the end of its range: pages split when nearly
	// full instead of half full, so there are fewer of them to write.
	tx.Bucket(bucketInbox).FillPercent = 0.9
	tx.Bucket(bucketEvents).FillPercent = 0.9
	tx.Bucket(bucketBySess).FillPercent = 0.9
	tx.Bucket(bucketRecent).FillPercent = 0.9
	return &wtx{Tx: tx, s: s}
}

// finish writes the group's shared state back before the commit.
func (w *wtx) finish() error {
	if w.idsDirty {
		if err := w.Bucket(bucketMeta).Put(keyLastID, w.ids.bytes()); err != nil {
			return err
		}
	}
	if w.recentAdded && w.Bucket(bucketRecent).Sequence() >= w.s.foldAt {
		if err := foldRecent(w.Tx); err != nil {
			return err
		}
	}
	if w.eventsAdded {
		return w.s.trimEvents(w.Bucket(bucketEvents))
	}
	return nil
}

// update runs fn in a durable write transaction, possibly shared with other
// writers, and returns once that transaction is on disk (or failed). When
// ctx is already done nothing is written; once queued, the write is waited
// for, so the caller never returns while its write might still commit.
func (s *Store) update(ctx context.Context, fn writeFunc) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{fn: fn, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	s.reqs <- req
	s.mu.RUnlock()
	return <-req.done
}

// commitLoop is the single writer. It takes the first queued write and every
// other write already queued behind it and commits them together, so the
// group is exactly what piled up while the previous commit was syncing: no
// waiting when there is one writer, large groups when there are many.
func (s *Store) commitLoop() {
	defer close(s.done)
	group := make([]*writeReq, 0, maxGroup)
	for first := range s.reqs {
		// The callers answered at the end of the previous group are
		// runnable but may not have run yet. Yielding once lets them
		// queue their next write, so that it joins this group instead
		// of making the next one: in BenchmarkAppend with 16 writers
		// groups grew from ~8 to ~13 appends and throughput by ~40%.
		// With nothing else runnable it returns at once.
		runtime.Gosched()
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

// commitGroup commits the group in one transaction. When a function fails,
// the whole transaction is rolled back, the failing write is retried alone
// (its error is then its own, not a side effect of its neighbours) and the
// rest of the group is run again without it — the same contract as bbolt's
// DB.Batch.
func (s *Store) commitGroup(group []*writeReq) {
	if d := s.broken.Load(); d != nil {
		for _, r := range group {
			r.done <- d
		}
		return
	}
	for len(group) > 0 {
		failed := -1
		err := s.guardWrite(func() error {
			return s.db.Update(func(tx *bbolt.Tx) error {
				w := s.newWtx(tx)
				for i, r := range group {
					if err := s.safeCall(r.fn, w); err != nil {
						failed = i
						return err
					}
				}
				return w.finish()
			})
		})
		if failed < 0 || s.broken.Load() != nil {
			for _, r := range group {
				r.done <- err
			}
			return
		}
		r := group[failed]
		r.done <- s.guardWrite(func() error {
			return s.db.Update(func(tx *bbolt.Tx) error {
				w := s.newWtx(tx)
				if err := s.safeCall(r.fn, w); err != nil {
					return err
				}
				return w.finish()
			})
		})
		group[failed] = group[len(group)-1]
		group = group[:len(group)-1]
	}
}

// guardWrite is guard for a write transaction. Damage found while writing
// breaks the store for writes: bbolt, panicking halfway through a commit or
// its rollback, may keep its write lock or its free page list in a state
// that does not match the file, and writing on would spread the damage.
// Every later write returns the same *DamagedError at once; reads go on
// where the pages they need are sound.
func (s *Store) guardWrite(fn func() error) error {
	err := guard(s.path, fn)
	var d *DamagedError
	if errors.As(err, &d) {
		s.broken.CompareAndSwap(nil, d)
	}
	return err
}

// safeCall turns a panic in a write function into that write's error, so one
// bad caller cannot stop the committer that every writer depends on: a
// *DamagedError when bbolt raised it on what it read (see guard), else
// the bug it is. A panic outside the write functions (committing the
// group) is guard's in commitGroup, and fails the whole group.
func (s *Store) safeCall(fn writeFunc, w *wtx) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if d := damageOf(s.path, p); d != nil {
				err = d
				return
			}
			err = fmt.Errorf("panic in write: %v", p)
		}
	}()
	return fn(w)
}

// seqKey is the events bucket key of seq.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }
