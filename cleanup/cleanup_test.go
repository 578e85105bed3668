package cleanup

import (
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
)

// TestFiringsAreBounded: the ledger remembers the last firings of a bounded
// number of sessions, the most recent ones, so that a late message of a
// session written to a moment ago is still found due, however many
// sessions came before.
func TestFiringsAreBounded(t *testing.T) {
	l := New(nil, nil, Options{})
	var seq uint64
	fire := func(id core.SessionID) uint64 {
		seq++
		l.noteFired(core.Event{Kind: core.EventHumanMessage, Session: id, Seq: seq}, core.LifetimeNextInput)
		return seq
	}
	for i := range 10 * firedSessions {
		fire(core.SessionID(fmt.Sprint("s", i)))
		if n := len(l.fired); n > 2*firedSessions {
			t.Fatalf("after %d sessions the ledger remembers %d, more than %d", i+1, n, 2*firedSessions)
		}
	}
	if n := len(l.fired); n < firedSessions {
		t.Errorf("it remembers %d sessions, fewer than %d", n, firedSessions)
	}
	// The newest sessions are remembered: a message sent before their
	// rule fired is due.
	for i := 10*firedSessions - firedSessions; i < 10*firedSessions; i++ {
		id := core.SessionID(fmt.Sprint("s", i))
		if !l.firedAfter(id, core.LifetimeNextInput, l.fired[id][core.LifetimeNextInput]-1) {
			t.Fatalf("session %s's firing was forgotten", id)
		}
	}
	// A session forgotten long ago that fires again is remembered
	// among the newest, by its last firing.
	old := core.SessionID("s0")
	at := fire(old)
	for i := range firedSessions / 2 {
		fire(core.SessionID(fmt.Sprint("t", i)))
	}
	if !l.firedAfter(old, core.LifetimeNextInput, at-1) {
		t.Error("a session that fired again was forgotten")
	}
}
