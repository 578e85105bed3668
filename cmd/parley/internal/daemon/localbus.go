package daemon

import (
	"sync"

	"github.com/parley-chat/parley/core"
)

// localBus is the local bus (Daemon.Bus) as the command service and the
// adapters publish on it: it remembers the last logged event delivered to
// the bus's subscribers, in the order they received it, so that WaitIdle
// knows when the dispatcher and the cleanup ledger (which record the Seq
// of the last event they consumed) have consumed everything this instance
// published. An ordered bus (bbolt) delivers in Seq order, holding back an
// event until the ones before it were published, so the last delivered is
// the largest Seq published; an unordered one (PostgreSQL) delivers each
// event as it is published, so publishing is serialised here to know
// which was last.
type localBus struct {
	*core.MemBus
	ordered bool

	mu     sync.Mutex
	latest uint64
}

// Publish implements core.Bus.
func (b *localBus) Publish(e core.Event) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.MemBus.Publish(e)
	switch {
	case e.Seq == 0:
	case b.ordered:
		b.latest = max(b.latest, e.Seq)
	default:
		b.latest = e.Seq
	}
}

// last is the Seq of the last logged event the bus's subscribers were
// given; 0 before any.
func (b *localBus) last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.latest
}
