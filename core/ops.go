package core

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// OpKind is the kind of a platform operation; its order is the priority.
type OpKind int

// Operation kinds, highest priority first: a new message matters more than
// tidying up, tidying up more than one more edit of a streaming message,
// and all of them more than a title or a typing indicator.
const (
	OpSend OpKind = iota
	OpDelete
	OpEdit
	OpRename
	OpTyping
)

// LogValue names the kind in structured logs (JSON would show a number).
func (k OpKind) LogValue() slog.Value { return slog.StringValue(k.String()) }

func (k OpKind) String() string {
	if k < OpSend || k > OpTyping {
		return fmt.Sprintf("OpKind(%d)", int(k))
	}
	return [...]string{"send", "delete", "edit", "rename", "typing"}[k]
}

// Op is one platform operation for the Outbox.
type Op struct {
	Kind    OpKind
	Adapter AdapterName
	// Place is where the operation lands, for pacing. The zero Place
	// (a session not yet bound) is paced by the adapter's account limits.
	Place Place
	// Calls are the kinds of platform call Run makes when they differ
	// from Kind: the op is counted by the limits of every kind it calls,
	// while Kind still orders it (priority, and the spreading of contended
	// edits, see readyAt). Nil means Kind. A platform that limits sends and
	// edits separately (Slack: messages per channel, edits per workspace)
	// needs it: the output op, an edit by its Kind, posts the output
	// message when the turn has none yet (and the session's root on a
	// Binder when it has no binding), a turn's "done" message is a send
	// queued at edit priority, and its final output an edit queued at send
	// priority.
	Calls []OpKind
	// Key coalesces: while an op with the same Key is still pending, a new
	// one replaces it in place (keeping its turn in the queue) and the old
	// one's Done gets ErrSuperseded. Empty Key never coalesces.
	Key string
	// Timeout is the deadline of one run (zero: DefaultTimeout(Kind)). A
	// run that overruns it failed transiently and is retried.
	Timeout time.Duration
	// Expires, when set, drops the op with ErrExpired if it cannot start
	// by then (a typing indicator held back by pacing is not worth sending
	// late).
	Expires time.Time
	// BestEffort ops are not retried: a failure ends them (typing).
	BestEffort bool
	// Run performs the operation at place (the op's Place, as paced). It
	// is called with no outbox lock held, at most once at a time per
	// Place, with a context that ends at the op's deadline or when the
	// outbox closes, and returns the platform's error, or ErrNoCall when it
	// found nothing to do.
	Run func(ctx context.Context, place Place) error
	// Done, if set, is called once with the final outcome: nil on
	// success; the permanent error that ended it; ErrSuperseded,
	// ErrExpired, or an error wrapping ErrOutboxClosed.
	Done func(error)
}

// Pacer runs a platform call an adapter makes itself, outside any event
// (Telegram creates the forum topic for /new), through the same pacing,
// pauses, retries and deadlines as everything else. The Outbox is one.
type Pacer interface {
	// Do runs op and blocks until it succeeded or ended for good, and
	// returns its outcome (ErrSuperseded, ErrExpired or ErrOutboxClosed
	// included), or ctx's error when ctx ends first; op then still runs.
	Do(ctx context.Context, op Op) error
}

// MethodPacer paces the platform calls an adapter chooses at call time, by
// the adapter's limits on methods (Limit.Methods): one operation may
// become any of several methods the platform counts on its own, which the
// outbox cannot know when it starts the operation. The adapter asks before
// each such call and, when told to wait, makes no call and returns a
// *RateLimitError of the operation's conversation, so the outbox retries
// it later. The Outbox is one.
type MethodPacer interface {
	// TakeMethod counts one call of method at place in every window of
	// adapter's method limits that names it, and returns 0; or, when one
	// of them has no room or a rate limit paused place's scope, counts
	// nothing and returns how long until all have room. It never waits
	// for room; with a shared PaceLedger it blocks for one round trip to
	// the store (bounded by a deadline). A method no limit names is not
	// paced: it always returns 0.
	TakeMethod(adapter AdapterName, place Place, method string) (wait time.Duration)
}
