package web_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/parley-chat/parley/core/uistate"
)

// Without ?ui=delta the stream sends whole states in ui_state_updated
// messages after the events (coalesced); the one with the highest seq is
// the snapshot a reload gives, and event messages carry no delta.
func TestStreamCarriesWholeStates(t *testing.T) {
	s := newStack(t)
	id := s.newSession("whole states")
	before := s.snapshot(id)
	if before.Type != uistate.UISnapshotType || before.Version != uistate.UIStateVersion {
		t.Fatalf("snapshot envelope %q %q", before.Type, before.Version)
	}
	c := s.sse("?session="+string(id), strconv.FormatUint(before.Seq, 10))
	s.conversation(id, 1)
	after := s.snapshot(id)

	kept := before
	for kept.Seq < after.Seq {
		select {
		case f := <-c.states:
			var env uistate.UISnapshot
			if err := json.Unmarshal([]byte(f.Data), &env); err != nil {
				t.Fatal(err)
			}
			if f.ID != "" || env.Type != uistate.UIUpdateType || env.Version != uistate.UIStateVersion || env.State.Seq != env.Seq {
				t.Fatalf("not a ui_state_updated envelope (id %q): %s", f.ID, f.Data)
			}
			if env.Seq < kept.Seq {
				t.Fatalf("state of seq %d after one of %d", env.Seq, kept.Seq)
			}
			kept = env
		case <-time.After(wait):
			t.Fatalf("no state past seq %d (snapshot %d)", kept.Seq, after.Seq)
		}
	}
	if got, want := stateJSON(t, kept.State), stateJSON(t, after.State); got != want {
		t.Fatalf("the last state streamed differs from the snapshot:\n%s\nwant\n%s", got, want)
	}
	for len(c.frames) > 0 {
		if m := c.next(wait).msg(t); m.UI != nil {
			t.Fatalf("event %d carries a delta without ?ui=delta", m.Seq)
		}
	}
}
