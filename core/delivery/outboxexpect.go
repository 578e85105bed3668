package delivery

import (
	"time"

	"github.com/parley-chat/parley/core"
)

// Tidying up behind the answer. When a person writes, a turn starts and
// parley queues tidy-up work in their conversation at once: the status
// rename ("working"), the deletion of their previous input and of the last
// turn's notices. On a platform that lets one call a second through per
// chat (Telegram), the first of these takes the second in which the
// agent's first text would have gone out, and the person waits up to a
// second longer for the answer they wrote for. So while a conversation
// expects a message people wait for (Expect), its deletions and renames
// wait until an operation that posts a message there starts, or until the
// expectation's deadline: the first text goes first, the tidy-up follows
// in the next slots. Typing indicators are not held (they show at once and
// Telegram does not count them per chat).

// expectFor is how long a turn's tidy-up waits at most for its first
// message: the status of a turn whose agent thinks for long shows within
// it, and an answer that comes within it goes before the tidy-up.
const expectFor = 3 * time.Second

// expectation is what one conversation (a place of an adapter) waits for.
type expectation struct {
	key   string    // the turn it is for: a turn expects once
	until time.Time // the latest the tidy-up waits
	met   bool      // a message was posted: the tidy-up goes
}

// Expect says that the conversation of adapter a at p expects a message
// people wait for (the answer of the turn named by key), until at the
// latest: its deletions and renames wait until an operation that posts a
// message there starts, or until. An expectation with the same key as the
// last one is ignored, so a turn holds its tidy-up once. A zero until ends
// any expectation at p (the turn ended).
func (o *Outbox) Expect(a core.AdapterName, p core.Place, key string, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := placeKey(a, p)
	if until.IsZero() {
		if x, ok := o.expect[k]; ok {
			delete(o.expect, k)
			if !x.met {
				o.signal()
			}
		}
		return
	}
	if x, ok := o.expect[k]; ok && x.key == key {
		return
	}
	if o.expect == nil {
		o.expect = map[string]expectation{}
	}
	o.expect[k] = expectation{key: key, until: until}
}

// expectedUntil is when op may run at the earliest because of an
// expectation at its place. Callers hold o.mu.
func (o *Outbox) expectedUntil(op core.Op) time.Time {
	if op.Kind != core.OpDelete && op.Kind != core.OpRename {
		return time.Time{}
	}
	if x, ok := o.expect[placeKey(op.Adapter, op.Place)]; ok && !x.met {
		return x.until
	}
	return time.Time{}
}

// metLocked records that op, starting now, posts the message its place
// expected. Callers hold o.mu.
func (o *Outbox) metLocked(op core.Op) {
	if !posts(op) {
		return
	}
	k := placeKey(op.Adapter, op.Place)
	if x, ok := o.expect[k]; ok && !x.met {
		x.met = true
		o.expect[k] = x
	}
}
