package delivery

import (
	"sync"

	"github.com/parley-chat/parley/core"
)

// notified remembers, per session and adapter, the turn in which a
// notifying message (an agent's message, a question) already reached the
// person, so that the turn's completion adds its own notifying "done"
// message only when nothing has notified them yet.
type notified struct {
	mu sync.Mutex
	// turns holds the turn plus one (zero is "none"); an entry is dropped
	// when its turn completes.
	turns map[string]uint64
}

func newNotified() *notified { return &notified{turns: map[string]uint64{}} }

func notifiedKey(id core.SessionID, name core.AdapterName) string {
	return string(id) + "\x00" + string(name)
}

// mark records that s's current turn notified on name.
func (n *notified) mark(s core.Session, name core.AdapterName) {
	n.mu.Lock()
	n.turns[notifiedKey(s.ID, name)] = s.Turn + 1
	n.mu.Unlock()
}

// complete forgets the session's entry on name as its turn completes and
// reports whether that turn had notified already.
//
// mark takes the turn from the session as the dispatcher read it, which
// may be later than the message's own: the agent yielded before its
// message was dispatched. Events are dispatched in order, so nothing of a
// later turn has been when this turn completes: an entry of this turn or
// later is this turn's notification; one of an earlier turn is stale (its
// completion went elsewhere).
func (n *notified) complete(id core.SessionID, name core.AdapterName, turn uint64) bool {
	k := notifiedKey(id, name)
	n.mu.Lock()
	defer n.mu.Unlock()
	already := n.turns[k] >= turn+1
	delete(n.turns, k)
	return already
}
