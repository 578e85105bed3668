package slack

import (
	"errors"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// spent says how long the method's windows need, for the conversation
// only, and no less than 100 ms (the outbox's windows count the calls;
// their waits are checked exactly in core/delivery's tests).
func TestSpent(t *testing.T) {
	for _, tc := range []struct{ wait, want time.Duration }{
		{39950 * time.Millisecond, 39950 * time.Millisecond},
		{10 * time.Millisecond, 100 * time.Millisecond},
	} {
		var rl *core.RateLimitError
		if err := spent("chat.startStream", tc.wait); !errors.As(err, &rl) || rl.RetryAfter != tc.want || rl.Scope != core.ScopeConversation || rl.Kinds != nil {
			t.Fatalf("spent(%v) = %v, want a %v wait of the conversation, every kind", tc.wait, err, tc.want)
		}
	}
}
