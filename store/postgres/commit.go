package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/jackc/pgx/v5/pgconn"
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
