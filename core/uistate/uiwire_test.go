package uistate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// The fixtures under testdata/uistate are written from the specification's
// text (issue 11): the envelopes and the three named item kinds, plus
// parley's own Question. Each must decode into parley's types and encode
// back to the same JSON, and the values parley builds must encode to them.

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "uistate", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameJSON fails unless a and b are the same JSON value.
func sameJSON(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %v in %s", what, err, got)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: fixture: %v", what, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("%s:\n got %s\nwant %s", what, got, want)
	}
}

func wireAt(sec int) time.Time { return time.Date(2026, 3, 1, 12, 0, sec, 0, time.UTC) }

func exit(n int) *int { return &n }

func TestUiWireFixturesRoundTrip(t *testing.T) {
	for _, name := range []string{"user_message.json", "assistant_markdown.json", "tool_group_running.json",
		"tool_group_done.json", "question_expired.json"} {
		t.Run(name, func(t *testing.T) {
			fix := readFixture(t, name)
			var it uistate.UIItem
			if err := json.Unmarshal(fix, &it); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(it)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, name, b, fix)
		})
	}
	for _, name := range []string{"snapshot.json", "updated.json"} {
		t.Run(name, func(t *testing.T) {
			fix := readFixture(t, name)
			var env uistate.UISnapshot
			if err := json.Unmarshal(fix, &env); err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, name, b, fix)
		})
	}
}

func TestUiWireBuiltValuesMatchFixtures(t *testing.T) {
	user := uistate.UIItem{ID: "msg:01JMSG00000000000000000001", Type: uistate.UIItemUser, Time: wireAt(1), Content: "deploy it, please"}
	asst := uistate.UIItem{ID: "msg:01JMSG00000000000000000002", Type: uistate.UIItemAssistant, Time: wireAt(2), Content: "**Deploying** now."}
	running := uistate.UIItem{ID: "tool:c1", Type: uistate.UIItemToolGroup, Time: wireAt(3),
		UIToolGroup: uistate.UIToolGroup{Tool: "shell", CallID: "c1", Cmd: "make deploy"}}
	done := uistate.UIItem{ID: "tool:c2", Type: uistate.UIItemToolGroup, Time: wireAt(4),
		UIToolGroup: uistate.UIToolGroup{Tool: "shell", CallID: "c2", Stdout: "ok\n", Stderr: "warning\n", ExitCode: exit(2),
			Approvals: []uistate.UIApproval{
				{Decision: core.DecisionApprove, Actor: core.Actor{ID: "42", Name: "Ann"}, Origin: "telegram", Time: wireAt(5)},
				{Decision: core.DecisionDenyContinue, Actor: core.Actor{ID: "U7", Name: "Bob"}, Origin: "slack", Time: wireAt(6)},
				{Decision: core.DecisionDenyAbort}}}}
	for name, it := range map[string]uistate.UIItem{"user_message.json": user, "assistant_markdown.json": asst,
		"tool_group_running.json": running, "tool_group_done.json": done} {
		b, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		sameJSON(t, name, b, readFixture(t, name))
	}

	// The snapshot and the update of one session: the whole state in
	// both, under their own type.
	ran := running
	ran.Time = wireAt(3)
	ran.Approvals = []uistate.UIApproval{{Decision: core.DecisionApprove, Actor: core.Actor{ID: "42", Name: "Ann"}, Origin: "web", Time: wireAt(4)}}
	ran.Stdout, ran.ExitCode = "done\n", exit(0)
	deployed := asst
	deployed.Time, deployed.Content = wireAt(5), "**Deployed.**"
	s := uistate.UIState{Version: uistate.UIStateVersion, Seq: 7, Session: "01JSESSION0000000000000000", Title: "deploy",
		Status: core.StatusWorking, Busy: true, Items: []uistate.UIItem{user, ran, deployed}}
	b, _ := json.Marshal(uistate.Snapshot(s))
	sameJSON(t, "snapshot", b, readFixture(t, "snapshot.json"))
	s.Seq, s.Status, s.Busy, s.Turn, s.Items = 8, core.StatusIdle, false, 1, []uistate.UIItem{user}
	b, _ = json.Marshal(uistate.Updated(s))
	sameJSON(t, "updated", b, readFixture(t, "updated.json"))
}

// TestUiWireApprovals: a ToolGroup's "approvals" is the specification's
// list of decision kinds — strings only — whoever reads it; who decided
// and when is in parley's "approvals_detail" beside it, entry for entry.
// A producer that writes only the specification's list is read as those
// decisions, and so is one whose detail does not match them.
func TestUiWireApprovals(t *testing.T) {
	it := uistate.UIItem{ID: "tool:c1", Type: uistate.UIItemToolGroup, Time: wireAt(1), UIToolGroup: uistate.UIToolGroup{Tool: "shell", CallID: "c1",
		Approvals: []uistate.UIApproval{{Decision: core.DecisionDenyContinue, Actor: core.Actor{ID: "42", Name: "Ann"}, Origin: "telegram", Time: wireAt(2)},
			{Decision: core.DecisionApprove, Origin: "web", Time: wireAt(3)}}}}
	b, err := json.Marshal(it)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Approvals []string `json:"approvals"`
	}
	// An unknown element type fails decoding: every entry must be a string.
	if err := json.Unmarshal(b, &spec); err != nil || !reflect.DeepEqual(spec.Approvals, []string{"deny_continue", "approve"}) {
		t.Fatalf("approvals as the specification reads them: %v %q in %s", err, spec.Approvals, b)
	}
	var back uistate.UIItem
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, it) {
		t.Fatalf("round trip: %v\n got %+v\nwant %+v", err, back, it)
	}
	// Without a decision, "approvals" is [] and the detail is left out.
	none, _ := json.Marshal(uistate.UIItem{ID: "tool:c2", Type: uistate.UIItemToolGroup, Time: wireAt(1), UIToolGroup: uistate.UIToolGroup{Tool: "t", CallID: "c2"}})
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(none, &fields); err != nil || string(fields["approvals"]) != "[]" || fields["approvals_detail"] != nil {
		t.Errorf("a call without decisions: %s", none)
	}

	for name, tt := range map[string]struct {
		wire string
		want []uistate.UIApproval
	}{
		"the specification's list alone": {`"approvals": ["approve", "deny_abort"]`,
			[]uistate.UIApproval{{Decision: core.DecisionApprove}, {Decision: core.DecisionDenyAbort}}},
		"a detail that does not match": {`"approvals": ["approve"], "approvals_detail": [{"decision": "approve"}, {"decision": "deny_abort"}]`,
			[]uistate.UIApproval{{Decision: core.DecisionApprove}}},
		"none": {`"approvals": []`, nil},
	} {
		var got uistate.UIItem
		wire := `{"id": "tool:c3", "kind": "ToolGroup", "ts": "2026-03-01T12:00:01Z", "tool": "t", "call_id": "c3", ` + tt.wire + `}`
		if err := json.Unmarshal([]byte(wire), &got); err != nil || !reflect.DeepEqual(got.Approvals, tt.want) {
			t.Errorf("%s: %v, approvals %+v, want %+v", name, err, got.Approvals, tt.want)
		}
	}
}

// A ui.ask that timed out: the reducer closes the question item, which
// then encodes as the fixture; an answer arriving after does not reopen it
// nor does a closed event for an answered question close it.
func TestUiQuestionClosed(t *testing.T) {
	const sess = "01JSESSION0000000000000000"
	q := core.Event{Seq: 1, Kind: core.EventQuestion, Session: sess, Time: wireAt(6), QuestionID: "a1b2c3",
		Options: []string{"yes", "no"}, Message: &core.Message{Role: core.RoleAssistant, Content: "Roll back?", Time: wireAt(6)}}
	closed := core.Event{Seq: 2, Kind: core.EventQuestionClosed, Session: sess, Time: time.Date(2026, 3, 1, 12, 5, 6, 0, time.UTC),
		QuestionID: "a1b2c3", Text: core.QuestionExpired}
	s := uistate.ReduceAll(uistate.NewUIState(sess), []core.Event{q, closed})
	if len(s.Items) != 1 {
		t.Fatalf("items: %+v", s.Items)
	}
	b, _ := json.Marshal(s.Items[0])
	sameJSON(t, "closed question", b, readFixture(t, "question_expired.json"))

	// The same through a live reducer and its deltas: a client applying
	// them gets what a snapshot reload shows.
	r := uistate.NewUIReducer(uistate.NewUIState(sess))
	st := uistate.NewUIState(sess)
	for _, e := range []core.Event{q, closed} {
		st = uistate.ApplyUpdate(st, r.Apply(e))
	}
	a, _ := json.Marshal(uistate.Snapshot(st))
	z, _ := json.Marshal(uistate.Snapshot(r.State()))
	sameJSON(t, "deltas vs snapshot", a, z)

	answered := uistate.ReduceAll(uistate.NewUIState(sess), []core.Event{q,
		{Seq: 2, Kind: core.EventAnswer, Session: sess, QuestionID: "a1b2c3", Message: &core.Message{Content: "yes"}},
		{Seq: 3, Kind: core.EventQuestionClosed, Session: sess, QuestionID: "a1b2c3", Text: core.QuestionCancelled}})
	if it := answered.Items[0]; it.Closed != "" || it.Answer == nil {
		t.Fatalf("an answered question was closed: %+v", it)
	}
}
