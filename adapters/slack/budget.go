package slack

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// The workspace's rate tiers of the methods that carry a streamed output,
// per method (Slack counts each method on its own).
var (
	startRate  = core.Rate{N: 20, Per: time.Minute}  // chat.startStream, Tier 2
	appendRate = core.Rate{N: 100, Per: time.Minute} // chat.appendStream, Tier 4
	stopRate   = core.Rate{N: 20, Per: time.Minute}  // chat.stopStream, Tier 2
	updateRate = core.Rate{N: 50, Per: time.Minute}  // chat.update, Tier 3
)

// postRate is chat.postMessage's limit in a channel.
var postRate = core.Rate{N: 1, Per: time.Second}

// budget is one method's sliding window in the workspace, counted by the
// adapter itself. With streaming on, one output edit may become any of
// three methods, which the outbox cannot tell apart (it knows operation
// kinds, not methods): it paces edits at the sum of their budgets, and the
// adapter picks, per edit, a method whose own budget has room — or, when
// none has, asks the outbox to come back later without calling Slack
// (spent), so that Slack never answers 429.
type budget struct {
	mu    sync.Mutex
	rate  core.Rate
	takes []time.Time
}

func newBudget(r core.Rate) *budget { return &budget{rate: r} }

// wait is how long until one more call fits (0: now).
func (b *budget) wait(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	if len(b.takes) < b.rate.N {
		return 0
	}
	return b.takes[len(b.takes)-b.rate.N].Add(b.rate.Per - early).Sub(now)
}

// take counts one call at now if it fits, and reports whether it did.
func (b *budget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.expire(now)
	if len(b.takes) >= b.rate.N {
		return false
	}
	b.takes = append(b.takes, now)
	return true
}

// early is how much sooner than its window allows a call is let through:
// the outbox counts an operation when it starts and the budget when the
// call is about to go, a few milliseconds apart, and a call the outbox
// paced right must not be held back for them. Slack's windows are not
// exact to that (slacktest lets calls come 100 ms early, which leaves
// room for the time a request takes to arrive).
const early = 50 * time.Millisecond

func (b *budget) expire(now time.Time) {
	i := 0
	for i < len(b.takes) && !now.Before(b.takes[i].Add(b.rate.Per-early)) {
		i++
	}
	b.takes = slices.Delete(b.takes, 0, i)
}

// spent is the answer when method's budget has no room: a rate limit of
// the operation's conversation only (all its kinds: the operation that
// wanted the method may be of any), for as long as the budget needs, with
// no call made. The outbox holds the operation back and retries it with
// the newest content.
func spent(method string, b *budget) error {
	wait := max(b.wait(time.Now()), 100*time.Millisecond)
	return &core.RateLimitError{RetryAfter: wait, Scope: core.ScopeConversation,
		Err: fmt.Errorf("slack: %s: the workspace's budget for it is spent for %s (counted by parley; Slack was not called)", method, wait.Round(time.Millisecond))}
}
