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
}

// Applies reports whether the limit counts operations of kind k.
func (l Limit) Applies(k OpKind) bool { return len(l.Kinds) == 0 || slices.Contains(l.Kinds, k) }

// window is the state of one sliding-window limit in one scope: the start
// times of the last N operations it counted, oldest first.
type window struct {
	rate  Rate
	takes []time.Time
}

// readyAt is the earliest time one more operation fits (now if it fits).
func (w *window) readyAt(now time.Time) time.Time {
	w.expire(now)
	if len(w.takes) < w.rate.N {
		return now
	}
	return w.takes[len(w.takes)-w.rate.N].Add(w.rate.Per)
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
