package core

import (
	"log/slog"
	"slices"
	"time"
)

// Scope is how far a platform's rate limit reaches. Pacing and the pauses
// a 429 causes apply per scope: a conversation is one Place, a group is
// every Place sharing Place.Chat (a Telegram supergroup's topics, a Slack
// channel's threads), the account is everything one adapter does (a Matrix
// account, a Slack workspace, a Telegram bot).
type Scope int

// Scopes, narrowest first. The zero Scope is "not said": a RateLimitError
// without a scope pauses the group, the safe guess for chat platforms.
const (
	ScopeUnspecified Scope = iota
	ScopeConversation
	ScopeGroup
	ScopeAccount
)

// LogValue names the scope in structured logs.
func (s Scope) LogValue() slog.Value { return slog.StringValue(s.String()) }

func (s Scope) String() string {
	switch s {
	case ScopeConversation:
		return "conversation"
	case ScopeGroup:
		return "group"
	case ScopeAccount:
		return "account"
	}
	return "unspecified"
}

// Rate is a sliding-window limit: at most N operations in any window of
// length Per. That is how platforms count (Telegram's 20 messages a minute
// per group may all go in the first seconds of a minute, then none until
// the oldest leaves the window), so the budget is spent in bursts when one
// conversation has it to itself and shared when several compete. The zero
// Rate is unlimited.
type Rate struct {
	N   int           `json:"n"`
	Per time.Duration `json:"per"`
}

// Unlimited reports whether r imposes no limit.
func (r Rate) Unlimited() bool { return r.N <= 0 || r.Per <= 0 }

// Limit is one rate a platform enforces within a scope, on the operation
// kinds it names (every kind when Kinds is empty). Slack limits
// chat.postMessage per channel and chat.update per workspace; Telegram's
// per-chat and per-group budgets count messages but not chat actions.
type Limit struct {
	Scope Scope    `json:"scope"`
	Kinds []OpKind `json:"kinds,omitempty"`
	Rate  Rate     `json:"rate"`
	// Learn, when set, makes Rate where the budget starts rather than
	// what it is: the outbox adjusts it to what the platform says (see
	// Learn). Nil keeps Rate as it is.
	Learn *Learn `json:"learn,omitempty"`
	// SendShare is the share of the budget kept for new messages (OpSend:
	// answers, notices, questions): ops of other kinds may not take the
	// window's last max(1, ⌊N·SendShare⌋) slots, so a message for people
	// never waits behind edits of a streaming output. Zero keeps nothing.
	SendShare float64 `json:"send_share,omitempty"`
}

// Applies reports whether the limit counts operations of kind k.
func (l Limit) Applies(k OpKind) bool { return len(l.Kinds) == 0 || slices.Contains(l.Kinds, k) }

// window is the state of one sliding-window limit in one scope: the start
// times of the last N operations it counted, oldest first.
type window struct {
	rate  Rate
	takes []time.Time
	// kept is the share of the window reserved for OpSend (Limit.SendShare).
	kept float64
	// learn is the learned budget the window counts by, when its Limit
	// learns (learn.go).
	learn *learning
}

// reserved is the number of the window's slots only OpSend may take: the
// kept share of N, at least one when a share is kept, and never all of
// them.
func (w *window) reserved() int {
	if w.kept <= 0 || w.rate.N < 2 {
		return 0
	}
	return min(w.rate.N-1, max(1, int(float64(w.rate.N)*w.kept)))
}

// readyAtFor is the earliest time one more operation of kind k fits (now
// if it fits): every
// slot for OpSend, all but the reserved ones for the other kinds.
func (w *window) readyAtFor(now time.Time, k OpKind) time.Time {
	n := w.rate.N
	if k != OpSend {
		n -= w.reserved()
	}
	w.expire(now)
	if len(w.takes) < n {
		return now
	}
	return w.takes[len(w.takes)-n].Add(w.rate.Per)
}

// take counts one operation at now.
func (w *window) take(now time.Time) {
	w.expire(now)
	w.takes = append(w.takes, now)
	if len(w.takes) > w.rate.N {
		w.takes = slices.Delete(w.takes, 0, len(w.takes)-w.rate.N)
	}
}

// last is when the newest counted operation started (zero when none).
func (w *window) last() time.Time {
	if len(w.takes) == 0 {
		return time.Time{}
	}
	return w.takes[len(w.takes)-1]
}

// refund gives back the operation counted at t (it made no call).
func (w *window) refund(t time.Time) {
	for i := len(w.takes) - 1; i >= 0; i-- {
		if w.takes[i].Equal(t) {
			w.takes = slices.Delete(w.takes, i, i+1)
			return
		}
	}
}

// emptied fills the window as a platform's token bucket is after it
// refused an op: spent, its slots coming free one steady interval (Per/N)
// apart from the end of the retry_after pause on.
func (w *window) emptied(now time.Time, retryAfter time.Duration) {
	steady := w.rate.Per / time.Duration(w.rate.N)
	w.takes = w.takes[:0]
	for k := range w.rate.N {
		w.takes = append(w.takes, now.Add(retryAfter-w.rate.Per+time.Duration(k)*steady))
	}
}

// expire forgets operations that left the window.
func (w *window) expire(now time.Time) {
	i := 0
	for i < len(w.takes) && !now.Before(w.takes[i].Add(w.rate.Per)) {
		i++
	}
	if i > 0 {
		w.takes = slices.Delete(w.takes, 0, i)
	}
}

// idle reports whether the window counts nothing any more, so its state
// can be dropped.
func (w *window) idle(now time.Time) bool {
	w.expire(now)
	return len(w.takes) == 0
}
