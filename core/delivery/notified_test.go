package delivery

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

// TestNotifiedBySnapshotAhead: an agent's message dispatched after its
// turn was yielded is marked with the session's next turn, and still
// spares that turn its "done" (TestTurnCompleteNotifiesOnce sent one under
// load); a mark of an earlier turn does not.
func TestNotifiedBySnapshotAhead(t *testing.T) {
	n := newNotified()
	n.mark(core.Session{ID: "s", Turn: 4}, "fake") // the message of turn 3, read after the yield
	if !n.complete("s", "fake", 3) {
		t.Error("turn 3's message did not count for turn 3")
	}
	if n.complete("s", "fake", 3) {
		t.Error("the entry outlived its turn's completion")
	}
	n.mark(core.Session{ID: "s", Turn: 2}, "fake") // a stale mark: turn 2's completion went elsewhere
	if n.complete("s", "fake", 3) {
		t.Error("an earlier turn's message counted for turn 3")
	}
}
