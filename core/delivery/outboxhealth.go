package delivery

import (
	"errors"
	"time"

	"github.com/parley-chat/parley/core"
)

// What an operator asks of the outbox, kept beside the scheduling: how
// operations ended (Outcome, for metrics), whether a platform is failing
// (one warning when its operations start failing, one line when they
// succeed again, instead of a line per retry) and whether work is piling
// up for a platform (one warning when its backlog passes
// OutboxOptions.BacklogWarn, one line when it is back under half of it).

// Outcomes of operations, as OutboxStats.Outcomes counts them.
const (
	OutcomeDone       = "done"       // the platform accepted it
	OutcomeRefused    = "refused"    // a permanent refusal ended it
	OutcomeSuperseded = "superseded" // a newer op with its Key replaced it
	OutcomeExpired    = "expired"    // it could not start before Expires
	OutcomeDropped    = "dropped"    // a best-effort op failed
	OutcomeClosed     = "closed"     // the outbox stopped first
)

// DefaultBacklogWarn is OutboxOptions.BacklogWarn's default.
const DefaultBacklogWarn = 200

// outcomeOf names how an op that ended with err ended.
func outcomeOf(op core.Op, err error) string {
	switch {
	case err == nil:
		return OutcomeDone
	case errors.Is(err, core.ErrSuperseded):
		return OutcomeSuperseded
	case errors.Is(err, core.ErrExpired):
		return OutcomeExpired
	case errors.Is(err, core.ErrOutboxClosed):
		return OutcomeClosed
	case op.BestEffort && !core.IsPermanent(err):
		return OutcomeDropped
	}
	return OutcomeRefused
}

// finishLocked ends op with err: it is counted, and Done is told.
func (o *Outbox) finishLocked(op core.Op, err error) {
	m := o.stats.Outcomes[op.Adapter]
	if m == nil {
		m = map[string]uint64{}
		o.stats.Outcomes[op.Adapter] = m
	}
	m[outcomeOf(op, err)]++
	if op.Done != nil {
		go op.Done(err)
	}
}

// failingLocked notes a transient failure of one of a's operations.
func (o *Outbox) failingLocked(a core.AdapterName, op core.OpKind, err error) {
	if _, ok := o.failingSince[a]; ok {
		return
	}
	o.failingSince[a] = time.Now()
	o.log.Warn("platform unhealthy: its operations are failing and being retried", "adapter", a, "op", op, "err", err)
}

// succeededLocked notes a success of one of a's operations.
func (o *Outbox) succeededLocked(a core.AdapterName) {
	since, ok := o.failingSince[a]
	if !ok {
		return
	}
	delete(o.failingSince, a)
	o.log.Info("platform recovered", "adapter", a, "after", time.Since(since).Round(time.Millisecond))
}

// pushLocked appends e to the queue.
func (o *Outbox) pushLocked(e *entry) {
	o.pending = append(o.pending, e)
	a := e.op.Adapter
	o.backlog[a]++
	if n := o.backlog[a]; n > o.opts.BacklogWarn && !o.backlogged[a] {
		o.backlogged[a] = true
		o.log.Warn("outbox backlog is high: operations are waiting for a platform", "adapter", a,
			"pending", n, "threshold", o.opts.BacklogWarn)
	}
}

// popLocked notes that e left the queue.
func (o *Outbox) popLocked(e *entry) {
	a := e.op.Adapter
	o.backlog[a]--
	if n := o.backlog[a]; o.backlogged[a] && n <= o.opts.BacklogWarn/2 {
		delete(o.backlogged, a)
		o.log.Info("outbox backlog back to normal", "adapter", a, "pending", n)
	}
	if o.backlog[a] == 0 {
		delete(o.backlog, a)
	}
}
