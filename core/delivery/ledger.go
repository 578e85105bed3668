package delivery

import (
	"context"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// Pacing shared among instances (OutboxOptions.Ledger, a core.PaceLedger
// the store offers when several instances share it). A platform counts its
// budgets per bot or app, so the windows an outbox keeps for itself are
// not the whole truth: another instance may have spent the same group's
// budget. The outbox therefore still decides by its own windows, pauses
// and priorities, exactly as without a ledger, and only then, from the
// goroutine of the op it started (never under its lock), takes the op's
// slots in the ledger: one slot in every window that counts the op, by its
// key, its current rate (a learned budget's as learned so far) and as many
// of its slots as the op's kind may use (SendShare), checking in the same
// round trip the pauses of the op's scopes. A refusal gives back the local
// takes and puts the op back in its place in the queue, and the local state
// learns what refused it: a full window holds the ops that count it until
// the ledger said it frees (as a pause of that budget, with no 429 and no
// retry counted), a pause another instance recorded becomes a pause here.
// So the outbox asks again only when the answer can have changed. A 429 an
// instance receives pauses its own scope at once, as always, and is then
// written to the ledger so that every instance holds back as long.
//
// Method limits (TakeMethod) are shared the same way, their window a
// methodLead shorter as locally. Learned budgets share their windows at
// the rate each instance learned; the learning itself (growth, the drop
// after a 429) stays each instance's own, fed by the shared pauses and
// refusals it meets.
//
// The ledger is asked with a deadline of ledgerTimeout. When it fails (the
// database is down or slow), the op goes on by the local windows alone —
// delivery neither stalls nor loses anything, and the worst that follows is
// what happened before shared pacing: a platform's 429, paused and
// retried — and the outbox leaves the ledger alone for ledgerRetry before
// it tries again, logging once when it stops using it and once when it is
// back. A slot taken for an op that then made no call (ErrNoCall) or moved
// is not given back to the ledger: it would cost a round trip to save
// another instance one slot's wait.

const (
	// ledgerTimeout bounds one call to the shared ledger: a healthy
	// database answers in a millisecond.
	ledgerTimeout = time.Second
	// ledgerRetry is how long the outbox paces alone after the ledger
	// failed, before it asks again.
	ledgerRetry = 5 * time.Second
)

// sharedSendShare is the share of a shared window kept for new messages
// when its limit keeps none of its own (Limit.SendShare). On one instance
// the outbox's priorities serve a message for people before deletions and
// edits of the same group; across instances they cannot, since each orders
// only its own queue, and an instance with nothing but deletions to make
// would win as many of a group's slots as the one whose answers wait. So in
// the ledger, other kinds may not take a window's last quarter.
const sharedSendShare = 0.25

// sharedSlotsFor is how many of w's slots an op of kind k may take in the
// ledger: as locally, but leaving sharedSendShare to new messages where
// the limit keeps no share of its own.
func sharedSlotsFor(w *window, k core.OpKind) int {
	n := w.slotsFor(k)
	if k == core.OpSend || w.kept > 0 || w.rate.N < 2 {
		return n
	}
	return min(n, w.rate.N-min(w.rate.N-1, max(1, int(float64(w.rate.N)*sharedSendShare))))
}

// sharedPause is a pause to write to the ledger: keys for d (none when
// the op's adapter does not share pacing).
type sharedPause struct {
	keys []string
	d    time.Duration
}

// takeShared takes e's slots in the shared ledger before e runs (no
// ledger, or one that failed lately: nothing to take). It reports false
// when the ledger refused: e is then back in the queue and its local takes
// are refunded. pk is e's place key.
func (o *Outbox) takeShared(e *entry, pk string) bool {
	if !o.sharesPacing(e.op.Adapter) {
		return true
	}
	k := shareKind(e.op)
	o.mu.Lock()
	if !o.ledgerUsableLocked(time.Now()) {
		o.mu.Unlock()
		return true
	}
	ws, keys := o.windowsKeyed(e.op, true)
	windows := make([]core.PaceWindow, len(ws))
	for i, w := range ws {
		windows[i] = core.PaceWindow{Key: keys[i], Rate: core.Rate{N: sharedSlotsFor(w, k), Per: w.rate.Per}}
	}
	o.mu.Unlock()
	take, ok := o.ledgerTake(windows, opPauses(e.op))
	if !ok || take.Taken() {
		return true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	ws, keys = o.windowsKeyed(e.op, true)
	o.heldLocked(take.Holds, ws, keys, k)
	o.log.Debug("shared rate budget full", "adapter", e.op.Adapter, "op", e.op.Kind, "holds", len(take.Holds))
	o.refundLocked(e)
	o.unserveLocked(e, pk)
	delete(o.running, pk)
	o.inflight--
	if o.closed {
		o.finishLocked(e.op, core.ErrOutboxClosed) // Close emptied the queue meanwhile
	} else {
		o.requeueLocked(e, e.notBefore)
	}
	o.idle.Broadcast()
	o.signal()
	return false
}

// sharesPacing reports whether adapter a's ops are paced with the other
// instances: there is a ledger and a declares limits (a platform that
// declares none, the web page, is not paced, and costs no round trip).
func (o *Outbox) sharesPacing(a core.AdapterName) bool {
	return o.opts.Ledger != nil && len(o.caps[a].Limits) > 0
}

// unserveLocked gives e's place back its turn among the conversations of
// its group (lastServed): a run the ledger refused served nobody, and a
// place refused again and again must not fall behind the others for it.
func (o *Outbox) unserveLocked(e *entry, pk string) {
	g := o.recent[scopeKey(e.op.Adapter, core.ScopeGroup, e.op.Place)]
	if g == nil || !g[pk].Equal(e.startedAt) {
		return // served again since, or pruned
	}
	if e.prevServed.IsZero() {
		delete(g, pk)
	} else {
		g[pk] = e.prevServed
	}
}

// opPauses are the keys of the pauses that hold op back: its scopes', and
// those of its kind in them.
func opPauses(op core.Op) []string {
	scopes := scopesOf(op)
	out := make([]string, 0, 2*len(scopes))
	for _, s := range scopes {
		out = append(out, s, kindPauseKey(s, op.Kind))
	}
	return out
}

// heldLocked applies the holds of a refused take: a held window (one of
// ws, named by keys) waits until it frees for ops of kind k, a pause
// becomes a local pause. It returns the longest wait.
func (o *Outbox) heldLocked(holds []core.PaceHold, ws []*window, keys []string, k core.OpKind) time.Duration {
	now := time.Now()
	var longest time.Duration
	for _, h := range holds {
		wait := max(h.Wait, time.Millisecond)
		longest = max(longest, wait)
		until := now.Add(wait)
		if i := slices.Index(keys, h.Key); i >= 0 {
			ws[i].hold(k, until)
			continue
		}
		if until.After(o.paused[h.Key]) {
			o.paused[h.Key] = until
		}
	}
	return longest
}

// ledgerTake asks the ledger to take windows unless pauses are on. It
// reports false when the ledger did not answer: the caller paces alone.
func (o *Outbox) ledgerTake(windows []core.PaceWindow, pauses []string) (core.PaceTake, bool) {
	ctx, cancel := context.WithTimeout(o.runCtx, ledgerTimeout)
	defer cancel()
	take, err := o.opts.Ledger.TakePace(ctx, windows, pauses)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ledgerAnsweredLocked(err)
	return take, err == nil
}

// sharePause writes p to the ledger, so that every instance holds back as
// long as this one. Called with no lock held.
func (o *Outbox) sharePause(p sharedPause) {
	if len(p.keys) == 0 || p.d <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(o.runCtx, ledgerTimeout)
	defer cancel()
	err := o.opts.Ledger.PausePace(ctx, p.keys, p.d)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ledgerAnsweredLocked(err)
}

// ledgerUsableLocked reports whether the ledger is asked at now: not
// within ledgerRetry of its last failure.
func (o *Outbox) ledgerUsableLocked(now time.Time) bool { return !now.Before(o.ledgerRetryAt) }

// ledgerAnsweredLocked records the outcome of a call to the ledger: a
// failure sets it aside for ledgerRetry, logged when it starts; a success
// after failures is logged too. A call cut short by Close is neither.
func (o *Outbox) ledgerAnsweredLocked(err error) {
	switch {
	case err == nil:
		if o.ledgerDown {
			o.ledgerDown = false
			o.log.Info("shared pacing is back: rate budgets are counted with the other instances again")
		}
	case o.runCtx.Err() != nil:
	default:
		o.ledgerRetryAt = time.Now().Add(ledgerRetry)
		if !o.ledgerDown {
			o.ledgerDown = true
			o.log.Warn("shared pacing unavailable: pacing by this instance's own count until the database answers", "retry_in", ledgerRetry, "err", err)
		}
	}
}
