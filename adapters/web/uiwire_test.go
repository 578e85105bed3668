package web_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/parley-chat/parley/core"
)

// Without ?ui=delta every event message carries the session's whole state
// in a ui_state_updated envelope; the last one a client keeps (the highest
// seq) is the snapshot a reload gives.
func TestStreamCarriesWholeStates(t *testing.T) {
	s := newStack(t)
	id := s.newSession("whole states")
	before := s.snapshot(id)
	if before.Type != core.UiSnapshotType || before.Version != core.UiStateVersion {
		t.Fatalf("snapshot envelope %q %q", before.Type, before.Version)
	}
	c := s.sse("?session="+string(id), strconv.FormatUint(before.Seq, 10))
	s.conversation(id, 1)
	after := s.snapshot(id)

	kept := before
	for kept.Seq < after.Seq {
		f := c.next(wait)
		var m struct {
			Seq uint64           `json:"seq"`
			UI  *core.UiSnapshot `json:"ui"`
		}
		if err := json.Unmarshal([]byte(f.Data), &m); err != nil {
			t.Fatal(err)
		}
		if m.UI == nil || m.UI.Type != core.UiUpdateType || m.UI.Version != core.UiStateVersion {
			t.Fatalf("event %d: ui is not a ui_state_updated envelope: %s", m.Seq, f.Data)
		}
		if m.UI.Seq < m.Seq || m.UI.State.Seq != m.UI.Seq {
			t.Fatalf("event %d carries the state of seq %d (state says %d)", m.Seq, m.UI.Seq, m.UI.State.Seq)
		}
		if m.UI.Seq > kept.Seq {
			kept = *m.UI
		}
	}
	if got, want := stateJSON(t, kept.State), stateJSON(t, after.State); got != want {
		t.Fatalf("the last state streamed differs from the snapshot:\n%s\nwant\n%s", got, want)
	}
}
