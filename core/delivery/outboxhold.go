package delivery

import (
	"time"

	"github.com/parley-chat/parley/core"
)

// Holding a platform's operations. While an adapter's platform is down
// (the daemon could not start the adapter, see PlatformHealth), calling it
// only fails: a refused token even fails every operation for good, which
// would end journaled deliveries that must go out once it is back. So the
// daemon holds the adapter: its operations stay queued, unattempted and
// uncounted, while every other adapter's go on; typing indicators and other
// ops with an Expires still expire. Releasing it runs what waited at once,
// without the backoff of failures from before the hold. Drain does not wait
// for held operations: they are journaled, and go out at the next start if
// not in this run.

// Hold stops (hold true) or resumes (false) running a's operations.
func (o *Outbox) Hold(a core.AdapterName, hold bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.held == nil {
		o.held = map[core.AdapterName]bool{}
	}
	if o.held[a] == hold {
		return
	}
	if hold {
		o.held[a] = true
		o.idle.Broadcast() // a Drain no longer waits for them
		return
	}
	delete(o.held, a)
	for _, e := range o.pending {
		if e.op.Adapter == a {
			e.notBefore, e.attempts = time.Time{}, 0
		}
	}
	o.signal()
}

// Held reports whether a's operations are held.
func (o *Outbox) Held(a core.AdapterName) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held[a]
}

// busyLocked reports whether an op is in flight or pending for an adapter
// that is not held: what Drain waits for.
func (o *Outbox) busyLocked() bool {
	if o.inflight > 0 {
		return true
	}
	for _, e := range o.pending {
		if !o.held[e.op.Adapter] {
			return true
		}
	}
	return false
}
