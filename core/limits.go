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

// Limit is one rate a platform enforces within a scope, either on the
// operation kinds it names (every kind when Kinds and Methods are empty) or
// on the platform methods it names. Slack limits chat.postMessage per
// channel and chat.update per workspace; Telegram's per-chat and per-group
// budgets count messages but not chat actions.
//
// A limit on Methods counts calls, not operations: the outbox never holds
// an operation back by it, and counts it only when the adapter asks
// before a call (MethodPacer.TakeMethod). It is for platforms where one
// operation becomes one of several methods the platform counts on its own,
// chosen by the adapter at call time (with streaming on, a Slack output
// edit is chat.appendStream while the text grows, chat.update for a
// rewrite, chat.stopStream before it, chat.postMessage when the message is
// gone). A Limit names Kinds or Methods, never both; Learn and SendShare
// are for limits on kinds.
type Limit struct {
	Scope Scope    `json:"scope"`
	Kinds []OpKind `json:"kinds,omitempty"`
	// Methods are the platform methods the limit counts, by the
	// platform's own names ("chat.appendStream").
	Methods []string `json:"methods,omitempty"`
	Rate    Rate     `json:"rate"`
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

// Applies reports whether the limit counts operations of kind k. A limit
// on methods counts no operation.
func (l Limit) Applies(k OpKind) bool {
	return len(l.Methods) == 0 && (len(l.Kinds) == 0 || slices.Contains(l.Kinds, k))
}

// Names reports whether the limit counts calls of method.
func (l Limit) Names(method string) bool { return slices.Contains(l.Methods, method) }

// Learn is how a Limit's budget follows what its platform says, for
// platforms whose limits are set per server and not published (a Matrix
// homeserver's rc_message). Limit.Rate is where the budget starts — the
// configured budget, or the most common server's default — and then:
//
//   - Growth, additive: while the platform has never answered with a rate
//     limit, a budget in use grows. "In use" means an op waited for it —
//     for room in its window, or for the steady rate between two edits of
//     one message (see editIntervalFor) — since the last step. When such
//     a budget counts one more op at least Every after the last step, its
//     N grows by the starting N (Synapse's 5 per 25 s becomes 10, 15, 20,
//     … per 25 s), up to Max. A budget nobody waits for does not grow:
//     a trickle of ops proves nothing about a larger burst.
//   - Decrease, to what was observed: a rate limit in the Limit's scope
//     (for one of its kinds) ends the growth for the outbox's life — such
//     a platform is followed, not probed — and the budget drops to half
//     of what the window counted when the platform refused (the refused op
//     included: it was allowed by the budget, so the budget was too
//     large), spread so that its steady rate is no faster than one op per
//     retry_after (a token bucket's retry_after is at most its refill
//     interval), and no faster than the starting Rate: one refusal cannot
//     tell a token bucket's burst from its rate, and a limited platform is
//     most likely the one the start describes (Synapse's default, or what
//     the person configured). The window is then as full as the
//     platform's bucket: its slots come free one steady interval apart
//     from the end of the pause, which is the outbox's usual one: exactly
//     retry_after. Rate limits for ops that started before the last drop
//     were earned by the old budget and change nothing; a later one, by
//     the new budget, halves it again.
//
// The learned state lives as long as the outbox (it is per scope key,
// meant for account-wide budgets: one per adapter); a restart starts from
// Limit.Rate again.
type Learn struct {
	// Max is the most the budget grows to, as a rate (10 per second); it
	// never grows past it, whatever the platform accepts.
	Max Rate `json:"max"`
	// Every is the least time between two growth steps: how long a budget
	// must have served without a rate limit before it grows again.
	Every time.Duration `json:"every"`
}
