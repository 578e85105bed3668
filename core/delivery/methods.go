package delivery

import (
	"time"

	"github.com/parley-chat/parley/core"
)

// Limits on methods (core.Limit.Methods) are kept by the outbox with all
// the others: the same sliding windows, in the same map, keyed by the same
// scopes, pruned when idle. They differ in what counts them: not an
// operation when it starts (they never hold one back, windowsFor skips
// them), but a call the adapter is about to make, when it asks TakeMethod.
// Kind limits and method limits so count different things and never each
// other's: an adapter that limits both a kind and a method it calls (Slack's
// posts per channel) declares both.
//
// A rate limit the platform answered pauses method calls as it pauses
// operations: a pause of a whole scope (a RateLimitError with no Kinds)
// holds back every call in it, so TakeMethod waits for it too — an op
// already in flight when another one's 429 paused its workspace makes no
// call Slack would refuse. A pause of some kinds only holds back operations
// of those kinds, which then do not start; the calls of the operations
// running meanwhile are not of them, and go on. A method no limit names is
// not paced at all, pauses included: the adapter asks for every call it
// might pace, and only its declarations decide.

// methodLead is how much sooner than its window allows a method call is
// let through. The outbox counts an operation when it starts and the
// methods it calls when each call is about to go, a few milliseconds
// later; where a method limit mirrors a kind limit (Slack's one post a
// second per channel, its appends at the edits' budget), a call whose
// operation the kind limit paced right must not be held back for those
// milliseconds. Platforms' windows are not exact to that either (the time
// a request takes to arrive varies more).
const methodLead = 50 * time.Millisecond

var _ core.MethodPacer = (*Outbox)(nil)

// TakeMethod implements core.MethodPacer. With a shared ledger it takes the
// call's slots there too, after its own windows let it go (ledger.go): one
// round trip, made with no lock held.
func (o *Outbox) TakeMethod(a core.AdapterName, p core.Place, method string) time.Duration {
	o.mu.Lock()
	ws, keys := o.methodWindows(a, p, method)
	if len(ws) == 0 {
		o.mu.Unlock()
		return 0 // a method not paced
	}
	now := time.Now()
	until := now
	scopes := scopesOf(core.Op{Adapter: a, Place: p})
	for _, k := range scopes {
		if t, ok := o.paused[k]; ok && t.After(until) {
			until = t
		}
	}
	for _, w := range ws {
		// Checked methodLead ahead: a slot whose take leaves the window
		// within methodLead is free. What the shared ledger holds is not
		// brought forward: it was judged with the lead already.
		at := w.readyAtFor(now.Add(methodLead), core.OpSend).Add(-methodLead)
		at = later(at, w.heldAll)
		if at.After(until) {
			until = at
		}
	}
	if until.After(now) {
		o.mu.Unlock()
		return until.Sub(now)
	}
	for _, w := range ws {
		w.take(now)
	}
	if o.opts.Ledger == nil || !o.ledgerUsableLocked(now) {
		o.mu.Unlock()
		return 0
	}
	windows := make([]core.PaceWindow, len(ws))
	for i, w := range ws {
		per := w.rate.Per
		if per > methodLead {
			per -= methodLead
		}
		windows[i] = core.PaceWindow{Key: keys[i], Rate: core.Rate{N: w.rate.N, Per: per}}
	}
	o.mu.Unlock()
	take, ok := o.ledgerTake(windows, scopes[:]) // a scope's pause holds every method back
	if !ok || take.Taken() {
		return 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	ws, keys = o.methodWindows(a, p, method)
	for _, w := range ws {
		w.refund(now)
	}
	return o.heldLocked(take.Holds, ws, keys, core.OpSend)
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// methodWindows returns the windows of adapter a's limits that name method
// at p (created lazily), and their keys. As for operations, a zero Place
// spends only the account's budgets.
func (o *Outbox) methodWindows(a core.AdapterName, p core.Place, method string) (out []*window, keys []string) {
	for i, l := range o.caps[a].Limits {
		if l.Rate.Unlimited() || !l.Names(method) || p.IsZero() && l.Scope != core.ScopeAccount {
			continue
		}
		key := windowKey(a, l.Scope, p, i)
		w, ok := o.windows[key]
		if !ok {
			w = &window{rate: l.Rate}
			o.windows[key] = w
		}
		out = append(out, w)
		keys = append(keys, key)
	}
	return out, keys
}
