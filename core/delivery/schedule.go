package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// pruneEvery is how often idle pacing state is dropped, so that memory does
// not grow with the number of conversations ever served.
const pruneEvery = time.Minute

func (o *Outbox) loop() {
	defer o.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return
		}
		next := o.dispatchLocked()
		o.mu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-o.wake:
		case <-timer.C:
		case <-o.runCtx.Done():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// dispatchLocked starts every op that may run now and returns when the next
// blocked one may run (zero when none is waiting on time).
//
// Its decisions are those of a full scan of the queue for each op started
// (the best op that may run now, by candidate.compare, then again), made
// with fewer scans: a dispatch that starts k ops scans the queue once or
// twice rather than k+1 times, and removes them from it in one pass.
// Starting an op only takes room in its windows and puts its place in
// flight: no other op becomes ready by it, and the order of the rest does
// not change (lastServed changes only for the started op's place, whose
// ops now wait for it). So one scan collects the ops ready now, sorted, and
// they are started in that order, each checked again first. What a full
// scan would still change is rechecked: ops with an Expires are dropped
// once their ready time passes it, and after any op was dropped so, the
// groups' competitors (groupsBusy) are counted again, by a new scan.
// Learned budgets (learn.go) grow as ops take and wait for them, which can
// make ready an op that was not: an outbox pacing any learned limit scans
// again after every op it started, as before.
func (o *Outbox) dispatchLocked() time.Time {
	now := time.Now()
	if now.After(o.pruneAt) {
		o.pruneLocked(now)
		o.pruneAt = now.Add(pruneEvery)
	}
	defer o.compactLocked()
	for {
		if o.inflight >= o.opts.MaxInFlight {
			return time.Time{}
		}
		o.compactLocked()
		var busy map[string]map[string]bool // made when first needed
		waiting := func(e *entry) func() map[string]bool {
			return func() map[string]bool {
				if busy == nil {
					busy = o.groupsBusy()
				}
				return busy[scopeKey(e.op.Adapter, core.ScopeGroup, e.op.Place)]
			}
		}
		var next time.Time
		var ready []candidate
		var expiring []*entry
		dropped := false
		for _, e := range o.pending {
			pk := placeKey(e.op.Adapter, e.op.Place)
			if o.running[pk] != nil {
				continue // woken when that place's op finishes
			}
			at := o.readyAt(e, now, waiting(e))
			if !e.op.Expires.IsZero() && at.After(e.op.Expires) {
				o.expireLocked(e)
				dropped = true
				continue
			}
			if !e.op.Expires.IsZero() {
				expiring = append(expiring, e)
			}
			if o.held[e.op.Adapter] {
				continue // woken by Hold's release
			}
			if at.After(now) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			ready = append(ready, candidate{e: e, pk: pk, served: o.lastServed(e.op, pk)})
		}
		if len(ready) == 0 {
			o.idle.Broadcast()
			return next
		}
		slices.SortStableFunc(ready, candidate.compare)
		o.startLocked(ready[0].e, now)
		if dropped || o.learns {
			continue // a full scan, as after every start
		}
		for _, c := range ready[1:] {
			if o.inflight >= o.opts.MaxInFlight {
				return time.Time{}
			}
			// What the full scan would drop now that windows have less
			// room.
			for _, x := range expiring {
				if x.dequeued || o.running[placeKey(x.op.Adapter, x.op.Place)] != nil {
					continue
				}
				if o.readyAt(x, now, waiting(x)).After(x.op.Expires) {
					o.expireLocked(x)
					dropped = true
				}
			}
			e := c.e
			if e.dequeued || o.running[c.pk] != nil || o.readyAt(e, now, waiting(e)).After(now) {
				continue // and stays so until this dispatch ends
			}
			o.startLocked(e, now)
			if dropped {
				break
			}
		}
	}
}

// candidate is an op that may run now, with what orders it and its place
// key.
type candidate struct {
	e      *entry
	pk     string
	served time.Time // lastServed
}

// compare orders two ops that may both run now: the better priority
// first; between equal priorities, the op whose conversation was served
// least recently (see lastServed), then the earlier enqueue. Conversations
// sharing a budget (a Telegram supergroup's one message a second) so take
// turns rather than going first come, first served: a session with ten
// continuation messages queued does not hold another session's answer
// back for ten seconds. One conversation's ops keep their order, since
// they share their last service.
//
// Among ops at send priority, one that posts a new message goes before one
// that only edits (a turn's final output is queued at send priority, see
// Dispatcher.enqueueOutput): an answer for people (a command's reply, a
// question, an approval) never waits behind other sessions' final texts
// when a budget lets out one message at a time.
func (c candidate) compare(d candidate) int {
	if c.e.op.Kind != d.e.op.Kind {
		return cmp.Compare(c.e.op.Kind, d.e.op.Kind)
	}
	if pc, pd := posts(c.e.op), posts(d.e.op); pc != pd {
		if pc {
			return -1
		}
		return 1
	}
	if n := c.served.Compare(d.served); n != 0 {
		return n
	}
	return cmp.Compare(c.e.seq, d.e.seq)
}

// posts reports whether op makes a new message: its Kind is a send and
// its Calls (when set) include one.
func posts(op core.Op) bool {
	if op.Kind != core.OpSend {
		return false
	}
	return op.Calls == nil || slices.Contains(op.Calls, core.OpSend)
}

// shareKind is the kind op counts as for the share of a budget kept for new
// messages (Limit.SendShare): a send when it posts one, an edit otherwise —
// a final output edit at send priority included, so that it does not take
// the slots kept for people's answers.
func shareKind(op core.Op) core.OpKind {
	if op.Kind == core.OpSend && !posts(op) {
		return core.OpEdit
	}
	return op.Kind
}

// startLocked takes e out of the queue and runs it.
func (o *Outbox) startLocked(e *entry, now time.Time) {
	o.metLocked(e.op)
	for _, w := range o.windowsFor(e.op) {
		w.take(now)
		o.tookLocked(e.op.Adapter, w, now)
	}
	e.prevServed = o.lastServed(e.op, placeKey(e.op.Adapter, e.op.Place))
	o.markRecent(e.op, now)
	o.dequeueLocked(e)
	e.startedAt = now
	if e.op.Key != "" {
		e.prevRun = o.lastRun[e.op.Key]
		o.lastRun[e.op.Key] = now
	}
	pk := placeKey(e.op.Adapter, e.op.Place)
	o.running[pk] = e
	o.inflight++
	o.wg.Add(1)
	go o.run(e, pk)
}

// expireLocked drops e, which can no longer start before it expires.
func (o *Outbox) expireLocked(e *entry) {
	o.dequeueLocked(e)
	o.finishLocked(e.op, core.ErrExpired)
}

// lastServed is when op's conversation last had an op started (zero when
// not within the last two periods of its group's longest limit, or never).
// pk is op's placeKey.
func (o *Outbox) lastServed(op core.Op, pk string) time.Time {
	if op.Place.IsZero() {
		return time.Time{}
	}
	return o.recent[scopeKey(op.Adapter, core.ScopeGroup, op.Place)][pk]
}

// dequeueLocked takes e out of the queue: at once for everything but the
// pending slice, from which compactLocked removes it (one pass for all the
// ops a dispatch starts, rather than a copy of the queue for each).
func (o *Outbox) dequeueLocked(e *entry) {
	e.dequeued = true
	o.dequeued++
	o.popLocked(e)
	if e.op.Key != "" && o.byKey[e.op.Key] == e {
		delete(o.byKey, e.op.Key)
	}
}

// compactLocked removes the dequeued entries from the pending slice, in
// order; dispatchLocked calls it before it lets go of the lock, so nothing
// else sees them.
func (o *Outbox) compactLocked() {
	if o.dequeued == 0 {
		return
	}
	kept := o.pending[:0]
	for _, e := range o.pending {
		if e.dequeued {
			e.dequeued = false
			continue
		}
		kept = append(kept, e)
	}
	clear(o.pending[len(kept):])
	o.pending = kept
	o.dequeued = 0
}

// markRecent remembers that op's conversation ran an op at now.
func (o *Outbox) markRecent(op core.Op, now time.Time) {
	if op.Place.IsZero() {
		return
	}
	g := scopeKey(op.Adapter, core.ScopeGroup, op.Place)
	if o.recent[g] == nil {
		o.recent[g] = map[string]time.Time{}
	}
	o.recent[g][placeKey(op.Adapter, op.Place)] = now
}

// pruneLocked drops pacing state nothing needs any more: windows that count
// nothing, pauses that ended, and edit times older than any edit interval.
func (o *Outbox) pruneLocked(now time.Time) {
	for k, w := range o.windows {
		if w.idle(now) {
			delete(o.windows, k)
		}
	}
	for k, t := range o.paused {
		if !t.After(now) {
			delete(o.paused, k)
		}
	}
	longest := o.opts.EditInterval
	for _, c := range o.caps {
		longest = max(longest, c.EditInterval)
	}
	longest = max(longest, o.longestLearnedInterval())
	for k, t := range o.lastRun {
		if now.Sub(t) > longest {
			delete(o.lastRun, k)
		}
	}
	var per time.Duration // of the limits on kinds, which competitors serves
	for _, c := range o.caps {
		for _, l := range c.Limits {
			if len(l.Methods) == 0 {
				per = max(per, l.Rate.Per)
			}
		}
	}
	for g, places := range o.recent {
		for p, t := range places {
			if now.Sub(t) >= 2*per {
				delete(places, p)
			}
		}
		if len(places) == 0 {
			delete(o.recent, g)
		}
	}
}

func (o *Outbox) run(e *entry, pk string) {
	defer o.wg.Done()
	if !o.takeShared(e, pk) {
		return // requeued until the shared budget has room
	}
	timeout := e.op.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout(e.op.Kind)
	}
	ctx, cancel := context.WithTimeout(o.runCtx, timeout)
	err := e.op.Run(ctx, e.op.Place)
	if err != nil && ctx.Err() == context.DeadlineExceeded && o.runCtx.Err() == nil {
		err = fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	cancel()
	if errors.Is(err, core.ErrNotModified) {
		err = nil
	}
	o.mu.Lock()
	if errors.Is(err, core.ErrNoCall) {
		o.refundLocked(e)
		err = nil
	}
	delete(o.running, pk)
	o.inflight--
	pause := o.settleLocked(e, err)
	o.idle.Broadcast()
	o.signal()
	o.mu.Unlock()
	o.sharePause(pause)
}

// settleLocked decides what follows a run that returned err, and returns
// the pause a rate limit asks the other instances for (none without one).
func (o *Outbox) settleLocked(e *entry, err error) (pause sharedPause) {
	a := e.op.Adapter
	var moved *MovedError
	if !errors.As(err, &moved) {
		count(o.stats.Ops, a, e.op.Kind)
	}
	var rl *core.RateLimitError
	switch {
	case err == nil:
		o.succeededLocked(a)
		o.finishLocked(e.op, nil)
	case errors.As(err, &moved):
		e.op.Place = moved.Place
		o.requeueLocked(e, e.notBefore)
	case o.closed || o.runCtx.Err() != nil:
		o.finishLocked(e.op, fmt.Errorf("%w: %w", core.ErrOutboxClosed, err))
	case core.IsPermanent(err):
		o.stats.Failed[a]++
		o.log.Error("platform operation failed for good", "adapter", a, "op", e.op.Kind, "err", err)
		o.finishLocked(e.op, err)
	case e.op.BestEffort:
		o.log.Debug("best-effort operation failed", "adapter", a, "op", e.op.Kind, "err", err)
		if errors.As(err, &rl) {
			pause = o.pauseLocked(e.op, rl)
			o.learnFromLimitLocked(e, rl)
		}
		o.finishLocked(e.op, err)
	case errors.As(err, &rl):
		pause = o.pauseLocked(e.op, rl)
		o.learnFromLimitLocked(e, rl)
		o.requeueLocked(e, time.Time{})
	default:
		o.failingLocked(a, e.op.Kind, err)
		e.attempts++
		o.stats.Retries[a]++
		backoff := o.backoff(e.attempts)
		lvl := slog.LevelDebug
		if e.attempts == 1 || backoff == o.opts.MaxBackoff && o.backoff(e.attempts-1) < o.opts.MaxBackoff {
			lvl = slog.LevelWarn
		}
		o.log.Log(context.Background(), lvl, "platform operation failed, retrying", "adapter", a, "op", e.op.Kind,
			"attempt", e.attempts, "in", backoff.Round(time.Millisecond), "err", err)
		o.requeueLocked(e, time.Now().Add(backoff))
	}
	return pause
}

// backoff is the wait before attempt n+1: MinBackoff·2^(n-1) capped at
// MaxBackoff, less up to a fifth at random so that ops failed by one outage
// do not all come back at the same instant.
func (o *Outbox) backoff(n int) time.Duration {
	d := o.opts.MaxBackoff
	if n < 32 {
		d = min(o.opts.MinBackoff<<(n-1), o.opts.MaxBackoff)
	}
	return d - time.Duration(o.jitter()*float64(d)/5)
}

func count(m map[core.AdapterName]map[core.OpKind]uint64, a core.AdapterName, k core.OpKind) {
	if m[a] == nil {
		m[a] = map[core.OpKind]uint64{}
	}
	m[a][k]++
}

// requeueLocked puts a failed op back in its old position, unless a newer
// op with the same key arrived meanwhile: that one carries newer content.
func (o *Outbox) requeueLocked(e *entry, notBefore time.Time) {
	if e.op.Key != "" {
		if _, newer := o.byKey[e.op.Key]; newer {
			o.finishLocked(e.op, core.ErrSuperseded)
			return
		}
		o.byKey[e.op.Key] = e
	}
	e.notBefore = notBefore
	o.pushLocked(e)
}
