package delivery

import (
	"slices"
	"strconv"
	"time"

	"github.com/parley-chat/parley/core"
)

// editAfter is when an edit may run given the last run of its Key.
func (o *Outbox) editAfter(op core.Op) time.Time {
	if op.Kind != core.OpEdit || op.Key == "" {
		return time.Time{}
	}
	last, ok := o.lastRun[op.Key]
	if !ok {
		return time.Time{}
	}
	return o.learnedEditAfter(op, last)
}

func (o *Outbox) editInterval(a core.AdapterName) time.Duration {
	if d := o.caps[a].EditInterval; d > 0 {
		return d
	}
	return o.opts.EditInterval
}

func placeKey(a core.AdapterName, p core.Place) string {
	return string(a) + "\x00" + p.Chat + "\x00" + p.Thread
}

// scopeKey names the scope s of an op of adapter a at p. A conversation or
// group scope of the zero Place (a session not bound yet) is the account:
// that is the only budget such an op is known to spend.
func scopeKey(a core.AdapterName, s core.Scope, p core.Place) string {
	switch {
	case p.IsZero() || s == core.ScopeAccount:
		return "a\x00" + string(a)
	case s == core.ScopeConversation:
		return "c\x00" + placeKey(a, p)
	default:
		return "g\x00" + string(a) + "\x00" + p.Chat
	}
}

// scopesOf are the scope keys an op belongs to, for pauses.
func scopesOf(op core.Op) [3]string {
	return [3]string{
		scopeKey(op.Adapter, core.ScopeConversation, op.Place),
		scopeKey(op.Adapter, core.ScopeGroup, op.Place),
		scopeKey(op.Adapter, core.ScopeAccount, op.Place),
	}
}

// windowsFor returns the sliding windows that count op (created lazily).
func (o *Outbox) windowsFor(op core.Op) []*window {
	ws, _ := o.windowsKeyed(op, false)
	return ws
}

// windowsKeyed returns the sliding windows that count op (created lazily)
// and, when withKeys, their keys.
func (o *Outbox) windowsKeyed(op core.Op, withKeys bool) (out []*window, keys []string) {
	for i, l := range o.caps[op.Adapter].Limits {
		if l.Rate.Unlimited() || !counts(op, l) {
			continue
		}
		if op.Place.IsZero() && l.Scope != core.ScopeAccount {
			continue // no conversation yet: its budgets are not spent
		}
		key := windowKey(op.Adapter, l.Scope, op.Place, i)
		w, ok := o.windows[key]
		if !ok {
			w = &window{rate: l.Rate, kept: l.SendShare}
			o.windows[key] = w
		}
		o.learnedWindow(w, key, l)
		out = append(out, w)
		if withKeys {
			keys = append(keys, key)
		}
	}
	return out, keys
}

// competitors is how many conversations of op's group compete for a
// budget renewed every per: those with work waiting now, and those served
// within the last two such periods — sessions that were busy a minute ago
// are likely to stream again, and they start one after another, so
// counting only the waiting ones would let the first arrivals burn the
// budget.
func (o *Outbox) competitors(op core.Op, waiting map[string]bool, now time.Time, per time.Duration) int {
	n := len(waiting)
	for p, at := range o.recent[scopeKey(op.Adapter, core.ScopeGroup, op.Place)] {
		if !waiting[p] && now.Sub(at) < 2*per {
			n++
		}
	}
	return n
}

// counts reports whether limit l counts op: whether it applies to a kind
// of call op makes.
func counts(op core.Op, l core.Limit) bool {
	if op.Calls == nil {
		return l.Applies(op.Kind)
	}
	for _, k := range op.Calls {
		if l.Applies(k) {
			return true
		}
	}
	return false
}

// readyAt is the earliest time e may run (now or earlier when it may run
// now). waiting returns the conversations of e's group with work queued or
// in flight, e's own included; it is called only for a contended edit.
//
// A budget shared by a group (Telegram's 20 a minute) is spent in a burst
// while it lasts: a lone stream shows its newest text every second, and
// five final texts go out at once when the budget has room for them. But
// an edit — whose text a later edit replaces anyway — may not take one of
// the budget's last slots, one for each conversation competing for it
// (see competitors): those are kept so that every
// conversation can still show its newest text soon, and edits are spread
// at the budget's steady rate (a minute / 20: every 3 s) instead of
// burning the whole minute in its first seconds on text that is stale a
// second later. New messages are never held back this way: each one is
// wanted.
func (o *Outbox) readyAt(e *entry, now time.Time, waiting func() map[string]bool) time.Time {
	t := e.notBefore
	if u := o.expectedUntil(e.op); u.After(t) {
		t = u
	}
	if len(o.paused) > 0 {
		for _, k := range scopesOf(e.op) {
			for _, k := range [2]string{k, kindPauseKey(k, e.op.Kind)} {
				if p, ok := o.paused[k]; ok && p.After(t) {
					t = p
				}
			}
		}
	}
	for _, w := range o.windowsFor(e.op) {
		at := o.windowReadyAt(e.op.Adapter, w, now, shareKind(e.op))
		if e.op.Kind == core.OpEdit && !slices.Contains(e.op.Calls, core.OpSend) && w.rate.N > 1 && len(w.takes) > 0 {
			if n := o.competitors(e.op, waiting(), now, w.rate.Per); n > 1 && len(w.takes) >= w.rate.N-n {
				if even := w.last().Add(w.rate.Per / time.Duration(w.rate.N)); even.After(at) {
					at = even
				}
			}
		}
		if at.After(t) {
			t = at
		}
	}
	return t
}

// groupsBusy lists, per group, the conversations with an op pending or in
// flight, for readyAt's competitors.
func (o *Outbox) groupsBusy() map[string]map[string]bool {
	busy := map[string]map[string]bool{}
	mark := func(a core.AdapterName, p core.Place) {
		g := scopeKey(a, core.ScopeGroup, p)
		if busy[g] == nil {
			busy[g] = map[string]bool{}
		}
		busy[g][placeKey(a, p)] = true
	}
	for _, e := range o.pending {
		mark(e.op.Adapter, e.op.Place)
	}
	for _, e := range o.running {
		mark(e.op.Adapter, e.op.Place)
	}
	return busy
}

// refundLocked gives back what a run that made no platform call was
// charged: its place in every window and its Key's last run.
func (o *Outbox) refundLocked(e *entry) {
	for _, w := range o.windowsFor(e.op) {
		w.refund(e.startedAt)
	}
	if e.op.Key != "" && o.lastRun[e.op.Key].Equal(e.startedAt) {
		if e.prevRun.IsZero() {
			delete(o.lastRun, e.op.Key)
		} else {
			o.lastRun[e.op.Key] = e.prevRun
		}
	}
}

// pauseLocked stops everything to the scope rl names until its retry_after
// has elapsed, and returns the pause for the shared ledger (ledger.go).
func (o *Outbox) pauseLocked(op core.Op, rl *core.RateLimitError) sharedPause {
	count(o.stats.RateLimited, op.Adapter, op.Kind)
	scope := rl.Scope
	if scope == core.ScopeUnspecified {
		scope = core.ScopeGroup
	}
	key := scopeKey(op.Adapter, scope, op.Place)
	keys := []string{key}
	if len(rl.Kinds) > 0 {
		keys = keys[:0]
		for _, k := range rl.Kinds {
			keys = append(keys, kindPauseKey(key, k))
		}
	}
	until := time.Now().Add(rl.RetryAfter)
	for _, k := range keys {
		if until.After(o.paused[k]) {
			o.paused[k] = until
		}
	}
	o.log.Warn("platform rate limit", "adapter", op.Adapter, "op", op.Kind, "scope", scope, "kinds", rl.Kinds, "retry_after", rl.RetryAfter)
	if !o.sharesPacing(op.Adapter) {
		return sharedPause{}
	}
	return sharedPause{keys: keys, d: rl.RetryAfter}
}

// kindPauseKey names a pause of one operation kind within a scope.
func kindPauseKey(scope string, k core.OpKind) string { return scope + "\x00k" + strconv.Itoa(int(k)) }
