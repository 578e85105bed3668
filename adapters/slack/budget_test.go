package slack

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

// A budget is a sliding window: chat.startStream's 20 a minute fit in one
// burst, the 21st waits exactly until the first leaves the window (less
// the 50 ms a call may come early), and spent says so for the
// conversation only.
func TestBudgetWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(startRate)
		first := time.Now()
		for i := range 20 {
			if !b.take(time.Now()) {
				t.Fatalf("call %d refused", i+1)
			}
			time.Sleep(time.Second)
		}
		if b.take(time.Now()) {
			t.Fatal("21st call within the minute taken")
		}
		if got, want := b.wait(time.Now()), first.Add(time.Minute-early).Sub(time.Now()); got != want || got != 39950*time.Millisecond {
			t.Fatalf("wait = %v, want %v (39.95s)", got, want)
		}
		var rl *core.RateLimitError
		if err := spent("chat.startStream", b); !errors.As(err, &rl) || rl.RetryAfter != 39950*time.Millisecond || rl.Scope != core.ScopeConversation {
			t.Fatalf("spent = %v, want a 39.95s wait of the conversation", err)
		}
		time.Sleep(39950 * time.Millisecond)
		if !b.take(time.Now()) {
			t.Fatal("call refused once the first left the window")
		}
		if b.take(time.Now()) {
			t.Fatal("a second call fit where one left")
		}
	})
}
