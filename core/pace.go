package core

import (
	"context"
	"time"
)

// A platform counts its rate limits per bot, app or account, not per
// connection: a Telegram group takes 20 messages a minute from the bot
// whichever parley instance sends them, and a 429's retry_after holds for
// all of them. Instances sharing a store share those budgets through a
// PaceLedger, the store's record of the slots taken and the pauses the
// platforms asked for, judged by the store's clock. Each instance's outbox
// still paces by its own windows first (they cost nothing); the ledger is
// asked only for an operation its own windows let go, and has the last
// word.

// PaceWindow is one sliding-window budget a take counts in: at most
// Rate.N slots in any Rate.Per, across every instance. Key names the
// budget (its adapter, scope, place and limit); instances agree on keys,
// never parse them.
type PaceWindow struct {
	Key  string
	Rate Rate
}

// PaceHold says that the budget or pause Key holds an operation back for
// Wait more, as the ledger's clock measured it when it answered.
type PaceHold struct {
	Key  string
	Wait time.Duration
}

// PaceTake is a PaceLedger's answer to a take: either the slots were taken
// (At is set, Holds is empty) or nothing was, and Holds lists every window
// that was full and every pause that was on.
type PaceTake struct {
	// At is when the slots were taken, by the ledger's clock; zero when
	// the take was refused.
	At time.Time
	// Holds are what refused the take, each with how long it still
	// holds; empty when the slots were taken.
	Holds []PaceHold
}

// Taken reports whether the take succeeded.
func (t PaceTake) Taken() bool { return len(t.Holds) == 0 }

// PaceLedger shares pacing among the parley instances of one store. The
// outbox calls it from the goroutine of the operation it is about to run,
// never under its own lock, with a context that carries a deadline; each
// method is one round trip to the store and blocks for it. A store used by
// one instance does not offer it (the outbox's own windows are the whole
// truth there). Errors are the store's (unreachable, closed, the deadline):
// the caller decides whether to go on without the ledger.
type PaceLedger interface {
	// TakePace takes one slot in every window of windows, all or none:
	// when each has fewer than its Rate.N slots taken in the last
	// Rate.Per and none of the pauses named by pauses is on, it records a
	// slot in each at the ledger's current time and returns that time.
	// Otherwise it records nothing and returns a Hold for every full
	// window (until its oldest counted slot leaves it) and every pause
	// still on (until it ends). Windows and pauses may be empty; a key
	// appears once among windows. Keys are compared bytewise and may hold
	// any byte. The caller owns the slices; the ledger keeps none of them.
	TakePace(ctx context.Context, windows []PaceWindow, pauses []string) (PaceTake, error)
	// PausePace records that nothing may go to each of keys for d from the
	// ledger's current time (a 429's retry_after): a later TakePace naming
	// one of them in its pauses is refused until then. A pause already on
	// that ends later is kept.
	PausePace(ctx context.Context, keys []string, d time.Duration) error
}
