package uistate_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/core/uistate"
)

func uiCall(seq uint64, kind core.EventKind, c core.ToolCall) core.Event {
	return core.Event{Seq: seq, Kind: kind, Session: uiSess, Time: uiAt(seq), Origin: core.OriginMCP, Call: &c}
}

func intp(i int) *int { return &i }

// TestReduceToolGroups: each call is one ToolGroup where it started; its
// output and the decisions on it fill in that item whatever came between,
// so the timeline reads a call, its output, then what followed. Repeated
// reports change nothing.
func TestReduceToolGroups(t *testing.T) {
	events := []core.Event{
		uiHuman(1, "m1", "build it"),
		uiCall(2, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "shell", Cmd: "make"}),
		uiCall(3, core.EventToolCall, core.ToolCall{CallID: "b", Tool: "shell", Cmd: "rm -rf build"}),
		uiQuestion(4, "q1", "Approve?", "Approve", "Deny and continue", "Deny and abort"),
		uiCall(5, core.EventToolOutput, core.ToolCall{CallID: "a", Stdout: "ok\n", ExitCode: intp(0)}),
		uiAnswerEv(6, "q1", "m2", "Deny and continue"),
		uiCall(7, core.EventToolApproval, core.ToolCall{CallID: "b", Decision: core.DecisionDenyContinue, Actor: core.Actor{ID: "42"}}),
		uiCall(8, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "other"}),                        // repeated: nothing
		uiCall(9, core.EventToolOutput, core.ToolCall{CallID: "a", Stdout: "again", ExitCode: intp(3)}), // repeated: nothing
		uiAssistant(10, "m3", "done"),
		uiCall(11, core.EventToolOutput, core.ToolCall{CallID: "b", Stderr: "denied", ExitCode: intp(1)}),
	}
	s := uistate.ReduceAll(uistate.NewUIState(uiSess), events)
	var ids []string
	for _, it := range s.Items {
		ids = append(ids, it.ID)
	}
	if got, want := strings.Join(ids, " "), "msg:m1 tool:a tool:b q:q1 msg:m3"; got != want {
		t.Fatalf("items %s, want %s", got, want)
	}
	a, b := s.Items[1], s.Items[2]
	if a.Type != uistate.UIItemToolGroup || a.Tool != "shell" || a.Cmd != "make" || a.Stdout != "ok\n" || a.ExitCode == nil || *a.ExitCode != 0 || len(a.Approvals) != 0 {
		t.Fatalf("call a %+v", a)
	}
	if b.Stderr != "denied" || *b.ExitCode != 1 || len(b.Approvals) != 1 || b.Approvals[0].Decision != core.DecisionDenyContinue || b.Approvals[0].Actor.ID != "42" {
		t.Fatalf("call b %+v", b)
	}
	// The same events applied one by one, and the updates a stream sends,
	// give the same state.
	st := uiNewStepper(t, uistate.NewUIState(uiSess))
	for _, e := range events {
		st.step(e)
	}
	st.finish()
	if uiJSON(t, st.state) != uiJSON(t, s) {
		t.Fatalf("stepped state differs:\n%s\n%s", uiJSON(t, st.state), uiJSON(t, s))
	}
	// On the wire: the ToolGroup's fields, as specified.
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var wire map[string]any
	if err := json.Unmarshal(raw, &wire); err != nil {
		t.Fatal(err)
	}
	if wire["kind"] != "ToolGroup" || wire["call_id"] != "b" || wire["cmd"] != "rm -rf build" || wire["exit_code"] != float64(1) ||
		fmt.Sprint(wire["approvals"]) != "[deny_continue]" ||
		wire["approvals_detail"].([]any)[0].(map[string]any)["actor"].(map[string]any)["id"] != "42" {
		t.Fatalf("wire %s", raw)
	}
}

// TestReduceToolOutputWithoutCall: an output whose call is not in the
// state (its event is gone from the log) still shows, as its own group.
// TestReduceToolGroupShowsMore: a call reported again with another
// command shows that command in its ToolGroup, where it started.
func TestReduceToolGroupShowsMore(t *testing.T) {
	s := uistate.ReduceAll(uistate.NewUIState(uiSess), []core.Event{
		uiCall(1, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "bash"}),
		uiAssistant(2, "m1", "meanwhile"),
		uiCall(3, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "bash", Cmd: "ls -la"}),
		uiCall(4, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "bash"}),
	})
	if len(s.Items) != 2 || s.Items[0].ID != "tool:a" || s.Items[0].Cmd != "ls -la" {
		t.Fatalf("items %+v", s.Items)
	}
}

func TestReduceToolOutputWithoutCall(t *testing.T) {
	s := uistate.ReduceAll(uistate.NewUIState(uiSess), []core.Event{
		uiCall(1, core.EventToolOutput, core.ToolCall{CallID: "x", Tool: "grep", Stdout: "hit", ExitCode: intp(0)}),
	})
	if len(s.Items) != 1 || s.Items[0].ID != "tool:x" || s.Items[0].Stdout != "hit" || s.Items[0].Tool != "grep" {
		t.Fatalf("items %+v", s.Items)
	}
}

func TestStateCmd(t *testing.T) {
	if got := core.StateCmd("ls -la"); got != "ls -la" {
		t.Fatalf("StateCmd kept %q", got)
	}
	long := strings.Repeat("a", 399) + "é" + strings.Repeat("z", 100)
	if got := core.StateCmd(long); got != strings.Repeat("a", 399) {
		t.Fatalf("StateCmd cut inside a character: %d bytes", len(got))
	}
	// The progress line shows the same from the kept part.
	tools := []core.ToolState{{CallID: "a", Tool: "t", Cmd: core.StateCmd(long)}}
	full := []core.ToolState{{CallID: "a", Tool: "t", Cmd: long}}
	if delivery.ProgressText(tools, 0) != delivery.ProgressText(full, 0) {
		t.Fatal("the progress line differs with the command a session keeps")
	}
}

func TestDecisionOf(t *testing.T) {
	for in, want := range map[string]string{"Approve": "approve", "deny and continue": "deny_continue", "3": "deny_abort",
		"deny_abort": "deny_abort", " 1 ": "approve"} {
		if got, ok := delivery.DecisionOf(delivery.ApprovalOptions, in); !ok || got != want {
			t.Errorf("DecisionOf(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "yes", "4", "approve it"} {
		if got, ok := delivery.DecisionOf(delivery.ApprovalOptions, in); ok {
			t.Errorf("DecisionOf(%q) = %q, want none", in, got)
		}
	}
}

// TestProgressText: the turn's calls only, one line each with its state,
// the newest ten, commands on one line and shortened.
func TestProgressText(t *testing.T) {
	tools := []core.ToolState{
		{CallID: "old", Tool: "shell", Cmd: "ls", Turn: 0, Done: true},
		{CallID: "a", Tool: "shell", Cmd: "make", Turn: 1, Done: true, ExitCode: intp(0)},
		{CallID: "b", Tool: "shell", Cmd: "make test\n-v", Turn: 1, Done: true, ExitCode: intp(2)},
		{CallID: "c", Tool: "deploy", Cmd: "kubectl `apply`", Turn: 1, Question: "q"},
		{CallID: "d", Tool: "rm", Turn: 1, Decision: core.DecisionDenyAbort},
		{CallID: "e", Tool: "edit_file", Cmd: strings.Repeat("x", 100), Turn: 1},
	}
	want := "🔧 Tools: 2 of 5 done\n" +
		"✅ **shell** `make` — exit 0\n" +
		"❌ **shell** `make test …` — exit 2\n" +
		"❓ **deploy** `` kubectl `apply` `` — waiting for approval\n" +
		"🚫 **rm** — denied\n" +
		"⏳ **edit\\_file** `" + strings.Repeat("x", 79) + "…` — running"
	if got := delivery.ProgressText(tools, 1); got != want {
		t.Fatalf("ProgressText:\n%s\nwant:\n%s", got, want)
	}
	if got := delivery.ProgressText(tools, 2); got != "" {
		t.Fatalf("a turn without calls: %q", got)
	}
	var many []core.ToolState
	for i := range 12 {
		many = append(many, core.ToolState{CallID: string(rune('a' + i)), Tool: "t", Turn: 0})
	}
	lines := strings.Split(delivery.ProgressText(many, 0), "\n")
	if len(lines) != 12 || lines[1] != "… 2 earlier" {
		t.Fatalf("long progress: %q", lines)
	}
}
