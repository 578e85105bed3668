// Package store holds what parley's stores share beyond core.Store: the
// interface the daemon needs of a store (core.Store, pairing, pruning and a
// health check) and the types of pruning. store/bolt implements it on an
// embedded bbolt file, store/postgres on PostgreSQL for several instances;
// store/storetest is the one behavioural test suite both must pass.
package store

import (
	"context"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/follow"
)

// Store is everything the daemon asks of a store.
type Store interface {
	core.Store
	core.PairingStore
	// Leaser gives what must have one consumer to one instance (see
	// core.Hold); on bbolt the one process holds every lease.
	core.Leaser
	// Prune removes what is kept only to recognise a repeat or to finish
	// a deletion, once older than opts.Before (see PruneOptions). It
	// returns what it removed so far when ctx ends.
	Prune(ctx context.Context, opts PruneOptions) (PruneStats, error)
	// Check looks at the store more thoroughly than opening it does, for
	// parley doctor. It blocks for as long as that takes and returns
	// an error naming the problem (wrapping core.ErrDamaged for damage).
	Check(ctx context.Context) error
	// Listener hints at commits of events by any instance sharing the
	// store, for the store/follow.Follower that publishes them.
	follow.Listener
	// Exchange carries which agents listen at each instance to the
	// others (store/follow.Presence).
	follow.Exchange
}

// DefaultPruneBatch is how many records one prune transaction deletes at
// most when PruneOptions.Batch is zero: a few milliseconds of work, so that
// appends never wait long behind it.
const DefaultPruneBatch = 1000

// PruneOptions say what Prune removes:
//
//   - dedup keys, by the time of the message they point at (its id's time):
//     a platform redelivery is recognised as long as its key is kept, so
//     Before must lie further back than any platform redelivers;
//   - reservation cursors (CursorPrefixes), by the time of the id they hold;
//   - cleanup-ledger rows, by their Created time, whether or not their
//     deletion is due.
//
// Messages, sessions, the event log (bounded by count) and the delivery
// journal are never pruned.
type PruneOptions struct {
	// Before is the cut-off: records made before it are removed.
	Before time.Time
	// CursorPrefixes name the cursors that are reservations rather than
	// positions: their value is a time-ordered id (core.EncodeID, a
	// session id) whose time says when they were made, and a cursor whose
	// name starts with one of them is removed like a dedup key. Other
	// cursors (a Telegram offset) are never removed.
	CursorPrefixes []string
	// Batch bounds the deletions of one write transaction. Zero means
	// DefaultPruneBatch.
	Batch int
}

// PruneStats counts what Prune removed.
type PruneStats struct {
	Dedup   int // dedup keys
	Cursors int // reservation cursors
	Ledger  int // cleanup-ledger rows
}
