package delivery

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/parley-chat/parley/core"
)

// learning is the state of one learned budget (a Limit with Learn, in one
// scope).
type learning struct {
	start, rate core.Rate
	maxN        int
	every       time.Duration
	// pressed: an op waited for this budget since the last step.
	pressed bool
	// stepAt is the last growth or drop; droppedAt the last drop.
	stepAt, droppedAt time.Time
	// limited: the platform answered with a rate limit; no more growth.
	limited bool
}

func newLearning(l core.Limit) *learning {
	maxN := l.Rate.N
	if m := l.Learn.Max; !m.Unlimited() {
		// The same rate over the budget's own window, rounded down.
		maxN = max(l.Rate.N, int(int64(m.N)*int64(l.Rate.Per)/int64(m.Per)))
	}
	every := l.Learn.Every
	if every <= 0 {
		every = l.Rate.Per / time.Duration(l.Rate.N)
	}
	return &learning{start: l.Rate, rate: l.Rate, maxN: maxN, every: every}
}

// learningLocked returns the learned state of the budget key (a window key),
// created at the limit's starting Rate.
func (o *Outbox) learningLocked(key string, l core.Limit) *learning {
	if o.learned == nil {
		o.learned = map[string]*learning{}
	}
	s, ok := o.learned[key]
	if !ok {
		s = newLearning(l)
		o.learned[key] = s
	}
	return s
}

// learnedWindow applies a learned budget to its window: the window counts
// by the rate learned so far.
func (o *Outbox) learnedWindow(w *window, key string, l core.Limit) {
	if l.Learn == nil || l.Rate.Unlimited() {
		return
	}
	w.learn = o.learningLocked(key, l)
	w.rate = w.learn.rate
}

// tookLocked is called for each window that counted an op at now: a budget
// that an op waited for since its last step grows, when it is due.
func (o *Outbox) tookLocked(a core.AdapterName, w *window, now time.Time) {
	if s := w.learn; s != nil && s.pressed {
		o.growLocked(a, w, now)
	}
}

// pressLocked notes that an op waited for w's budget at now, and grows the
// budget when it is due. It reports whether the budget grew.
func (o *Outbox) pressLocked(a core.AdapterName, w *window, now time.Time) bool {
	if w.learn == nil {
		return false
	}
	w.learn.pressed = true
	return o.growLocked(a, w, now)
}

// growLocked grows w's budget by one step when it may grow (the platform
// never limited it, it is below its Max) and the last step is at least
// Every behind.
func (o *Outbox) growLocked(a core.AdapterName, w *window, now time.Time) bool {
	s := w.learn
	if s.limited || s.rate.N >= s.maxN || now.Sub(s.stepAt) < s.every {
		return false
	}
	s.rate.N = min(s.maxN, s.rate.N+s.start.N)
	s.pressed, s.stepAt = false, now
	w.rate = s.rate
	o.log.Debug("rate budget grew", "adapter", a, "budget", fmt.Sprintf("%d per %s", s.rate.N, s.rate.Per))
	return true
}

// windowReadyAt is when w has room for one more op of kind k; an op that
// must wait presses the budget, which may grow it and let the op go now,
// or at its next step when that comes before room in the window.
func (o *Outbox) windowReadyAt(a core.AdapterName, w *window, now time.Time, k core.OpKind) time.Time {
	at := w.readyAtFor(now, k)
	if !at.After(now) {
		return at
	}
	if o.pressLocked(a, w, now) {
		return w.readyAtFor(now, k)
	}
	if s := w.learn; s != nil && !s.limited && s.rate.N < s.maxN {
		if due := s.stepAt.Add(s.every); due.Before(at) {
			return due
		}
	}
	return at
}

// editIntervalFor is the least time between two runs of edits with op's
// Key: the adapter's EditInterval, and for every learned budget that
// counts the edit, that budget's steady rate (Per/N), so that one message
// streaming alone never spends the budget faster than it renews. It also
// returns the learned windows that set the interval (none when the
// adapter's EditInterval did).
func (o *Outbox) editIntervalFor(op core.Op) (time.Duration, []*window) {
	d := o.editInterval(op.Adapter)
	var by []*window
	for _, w := range o.windowsFor(op) {
		if w.learn == nil {
			continue
		}
		if steady := w.rate.Per / time.Duration(w.rate.N); steady > d {
			d, by = steady, append(by[:0], w)
		} else if steady == d && by != nil {
			by = append(by, w)
		}
	}
	return d, by
}

// longestLearnedInterval is the longest edit interval a learned budget
// imposes now, so that pruning keeps the edit times it still needs.
func (o *Outbox) longestLearnedInterval() time.Duration {
	var d time.Duration
	for _, s := range o.learned {
		d = max(d, s.rate.Per/time.Duration(s.rate.N))
	}
	return d
}

// learnFromLimitLocked drops the learned budgets that rl concerns: those
// counting e's op in the scope rl names (and its kinds, when it names
// some), unless e started before their last drop.
func (o *Outbox) learnFromLimitLocked(e *entry, rl *core.RateLimitError) {
	scope := rl.Scope
	if scope == core.ScopeUnspecified {
		scope = core.ScopeGroup
	}
	for i, l := range o.caps[e.op.Adapter].Limits {
		if l.Learn == nil || l.Rate.Unlimited() || l.Scope != scope || !counts(e.op, l) || !kindsMeet(l, rl.Kinds) {
			continue
		}
		key := windowKey(e.op.Adapter, l.Scope, e.op.Place, i)
		s := o.learned[key]
		if s == nil || e.startedAt.Before(s.droppedAt) {
			continue
		}
		now := time.Now()
		counted := 1
		if w := o.windows[key]; w != nil {
			w.expire(now)
			counted = max(1, len(w.takes))
		}
		n := max(1, min(s.rate.N, counted)/2)
		s.rate = core.Rate{N: n, Per: max(s.rate.Per, time.Duration(n)*rl.RetryAfter)}
		if slower(s.start, s.rate) {
			// A limited platform is not taken to be more generous
			// than the budget it was configured with.
			s.rate = s.start
		}
		n, per := s.rate.N, s.rate.Per
		s.limited, s.pressed, s.stepAt, s.droppedAt = true, false, now, now
		if w := o.windows[key]; w != nil {
			w.rate = s.rate
			w.emptied(now, rl.RetryAfter)
		}
		o.log.Info("rate budget lowered to what the platform accepted", "adapter", e.op.Adapter, "scope", l.Scope,
			"budget", slog.StringValue(fmt.Sprintf("%d per %s", n, per)), "retry_after", rl.RetryAfter)
	}
}

// slower reports whether a allows fewer ops per unit of time than b.
func slower(a, b core.Rate) bool { return int64(a.N)*int64(b.Per) < int64(b.N)*int64(a.Per) }

// kindsMeet reports whether a rate limit naming kinds (none: all) concerns
// limit l.
func kindsMeet(l core.Limit, kinds []core.OpKind) bool {
	if len(kinds) == 0 {
		return true
	}
	for _, k := range kinds {
		if l.Applies(k) {
			return true
		}
	}
	return false
}

// windowKey names the window of limit i of adapter a in scope s at p.
func windowKey(a core.AdapterName, s core.Scope, p core.Place, i int) string {
	return fmt.Sprintf("%s\x00%d", scopeKey(a, s, p), i)
}

// learnedEditAfter is when an edit of op's Key, last run at last, may run
// again (see editIntervalFor). An edit held back by a learned budget's
// steady rate presses that budget, which may grow it and shorten the wait.
func (o *Outbox) learnedEditAfter(op core.Op, last time.Time) time.Time {
	d, by := o.editIntervalFor(op)
	now := time.Now()
	if !last.Add(d).After(now) {
		return last.Add(d)
	}
	grew := false
	for _, w := range by {
		grew = o.pressLocked(op.Adapter, w, now) || grew
	}
	if grew {
		d, _ = o.editIntervalFor(op)
	}
	return last.Add(d)
}
