package slack

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

// TestReceiverWaitsForRun: a request that arrives while Run is not running
// is queued as soon as Run opens the receiver within the wait, and answered
// "not receiving" when the wait passes first or its request ends.
func TestReceiverWaitsForRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r receiver
		var h core.Handler = nopHandler{}
		queued := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			_, ok := r.enterWait(nil, startWait, func(context.Context, core.Handler) { queued <- time.Since(start) })
			if !ok {
				queued <- -1
			}
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if len(queued) != 0 {
			t.Fatal("queued before Run opened the receiver")
		}
		r.open(t.Context(), h)
		if got := <-queued; got != time.Second {
			t.Fatalf("queued after %v, want exactly 1s (when Run opened)", got)
		}

		r.close()
		start = time.Now()
		if _, ok := r.enterWait(nil, startWait, func(context.Context, core.Handler) { t.Error("queued with Run stopped") }); ok {
			t.Fatal("entered with Run stopped")
		}
		if got := time.Since(start); got != startWait {
			t.Fatalf("gave up after %v, want %v", got, startWait)
		}

		done := make(chan struct{})
		close(done)
		if _, ok := r.enterWait(done, startWait, func(context.Context, core.Handler) { t.Error("queued for an ended request") }); ok {
			t.Fatal("entered for an ended request")
		}
	})
}

type nopHandler struct{ core.Handler }
