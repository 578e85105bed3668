package uistate_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

const uiSess core.SessionID = "01JSESSION0000000000000000"

var uiT0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func uiAt(seq uint64) time.Time { return uiT0.Add(time.Duration(seq) * time.Second) }

func uiMsg(kind core.EventKind, seq uint64, id, text string) core.Event {
	role := core.RoleUser
	switch kind {
	case core.EventAssistant, core.EventQuestion:
		role = core.RoleAssistant
	case core.EventNotice:
		role = core.RoleSystem
	}
	return core.Event{Seq: seq, Kind: kind, Session: uiSess, Time: uiAt(seq), Origin: "web",
		Message: &core.Message{ID: core.MessageID(id), Session: uiSess, Time: uiAt(seq), Role: role,
			Origin: "web", Mime: core.MimeMarkdown, Content: text}}
}

func uiHuman(seq uint64, id, text string) core.Event {
	return uiMsg(core.EventHumanMessage, seq, id, text)
}

func uiQueued(seq uint64, id, text string) core.Event { return uiMsg(core.EventQueued, seq, id, text) }

func uiAssistant(seq uint64, id, text string) core.Event {
	return uiMsg(core.EventAssistant, seq, id, text)
}

func uiOutput(seq uint64, text string, final bool) core.Event {
	return core.Event{Seq: seq, Kind: core.EventOutput, Session: uiSess, Time: uiAt(seq), Text: text, Final: final}
}

func uiTurn(seq uint64) core.Event {
	return core.Event{Seq: seq, Kind: core.EventTurnComplete, Session: uiSess, Time: uiAt(seq)}
}

func uiTool(seq uint64, id, name, status string) core.Event {
	return core.Event{Seq: seq, Kind: core.EventToolActivity, Session: uiSess, Time: uiAt(seq),
		Tool: &core.ToolActivity{ID: id, Name: name, Status: status}}
}

func uiQuestion(seq uint64, qid, text string, options ...string) core.Event {
	e := uiMsg(core.EventQuestion, seq, "mq"+qid, text)
	e.QuestionID, e.Options = qid, options
	return e
}

func uiAnswerEv(seq uint64, qid, id, text string) core.Event {
	e := uiMsg(core.EventAnswer, seq, id, text)
	e.QuestionID = qid
	return e
}

func uiStatus(seq uint64, title string, st core.Status) core.Event {
	return core.Event{Seq: seq, Kind: core.EventSessionUpdated, Session: uiSess, Time: uiAt(seq), Title: title, Status: st}
}

// uiShort names the kinds briefly in summaries.
var uiShort = map[uistate.UIItemType]string{uistate.UIItemUser: "user", uistate.UIItemAssistant: "assistant",
	uistate.UIItemOutput: "output", uistate.UIItemNotice: "notice", uistate.UIItemQuestion: "question",
	uistate.UIItemTools: "tools", uistate.UIItemToolGroup: "toolgroup"}

// uiSummary renders the timeline compactly for table assertions.
func uiSummary(s uistate.UIState) []string {
	out := make([]string, 0, len(s.Items))
	for _, it := range s.Items {
		line := fmt.Sprintf("%s %s %q", uiShort[it.Type], it.ID, it.Content)
		switch it.Type {
		case uistate.UIItemTools:
			calls := make([]string, 0, len(it.Tools))
			for _, c := range it.Tools {
				calls = append(calls, c.ID+"="+c.Status)
			}
			line = fmt.Sprintf("tools %s", strings.Join(calls, ","))
		case uistate.UIItemQuestion:
			line += fmt.Sprintf(" %v", it.Options)
			if it.Answer != nil {
				line += fmt.Sprintf(" -> %q", it.Answer.Content)
			}
		}
		if it.Queued {
			line += " queued"
		}
		if it.Final {
			line += " final"
		}
		if it.Cancel {
			line += " cancel"
		}
		out = append(out, line)
	}
	return out
}

// uiJSON is what a browser would see of s.
func uiJSON(tb testing.TB, s uistate.UIState) string {
	tb.Helper()
	b, err := json.Marshal(uistate.Snapshot(s))
	if err != nil {
		tb.Fatalf("marshal: %v", err)
	}
	return string(b)
}

// uiCheckInvariants fails tb when s breaks a rule every state must keep.
func uiCheckInvariants(tb testing.TB, s uistate.UIState) {
	tb.Helper()
	if s.Version != uistate.UIStateVersion {
		tb.Fatalf("version %q", s.Version)
	}
	ids := make(map[string]bool, len(s.Items))
	tools := make(map[string]bool)
	for i, it := range s.Items {
		if it.ID == "" || ids[it.ID] {
			tb.Fatalf("item %d: empty or duplicate id %q", i, it.ID)
		}
		ids[it.ID] = true
		if it.Type == uistate.UIItemTools {
			if i > 0 && s.Items[i-1].Type == uistate.UIItemTools {
				tb.Fatalf("item %d: two tools groups in a row", i)
			}
			for _, c := range it.Tools {
				if c.ID != "" && tools[c.ID] {
					tb.Fatalf("item %d: tool call %q twice", i, c.ID)
				}
				tools[c.ID] = true
			}
		}
	}
}

// uiStepper folds events one at a time through every path that must agree:
// Reduce, ReduceWithUpdate, UIReducer, and clients applying updates.
type uiStepper struct {
	tb                    testing.TB
	state                 uistate.UIState
	live                  *uistate.UIReducer
	viaUpdate, viaDiff    uistate.UIState
	viaLive               uistate.UIState
	steps, updates, empty int
}

func uiNewStepper(tb testing.TB, s uistate.UIState) *uiStepper {
	tb.Helper()
	return &uiStepper{tb: tb, state: s, live: uistate.NewUIReducer(s), viaUpdate: s, viaDiff: s, viaLive: s}
}

func (st *uiStepper) step(e core.Event) {
	tb := st.tb
	tb.Helper()
	prev := st.state
	before := uiJSON(tb, prev)
	next := uistate.Reduce(prev, e)
	if got := uiJSON(tb, prev); got != before {
		tb.Fatalf("step %d: Reduce modified prev:\n%s\nwas\n%s", st.steps, got, before)
	}
	want := uiJSON(tb, next)
	if next.Seq < prev.Seq {
		tb.Fatalf("step %d: seq went back from %d to %d", st.steps, prev.Seq, next.Seq)
	}
	uiCheckInvariants(tb, next)

	next2, upd := uistate.ReduceWithUpdate(prev, e)
	if got := uiJSON(tb, next2); got != want {
		tb.Fatalf("step %d: ReduceWithUpdate state differs:\n%s\nwant\n%s", st.steps, got, want)
	}
	if got := uiJSON(tb, prev); got != before {
		tb.Fatalf("step %d: ReduceWithUpdate modified prev", st.steps)
	}
	if upd.Type != uistate.UIDeltaType || upd.Version != uistate.UIStateVersion {
		tb.Fatalf("step %d: bad envelope %q %q", st.steps, upd.Type, upd.Version)
	}
	// A client receives the update as JSON.
	var wire uistate.UIUpdate
	b, err := json.Marshal(upd)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(b, &wire); err != nil {
		tb.Fatal(err)
	}
	st.viaUpdate = uistate.ApplyUpdate(st.viaUpdate, wire)
	if got := uiJSON(tb, st.viaUpdate); got != want {
		tb.Fatalf("step %d: applying updates gives\n%s\nwant\n%s\nupdate %s", st.steps, got, want, b)
	}
	st.viaDiff = uistate.ApplyUpdate(st.viaDiff, uistate.Diff(prev, next))
	if got := uiJSON(tb, st.viaDiff); got != want {
		tb.Fatalf("step %d: applying diffs gives\n%s\nwant\n%s", st.steps, got, want)
	}
	lupd := st.live.Apply(e)
	if lb, _ := json.Marshal(lupd); string(lb) != string(b) {
		tb.Fatalf("step %d: UIReducer update\n%s\nwant\n%s", st.steps, lb, b)
	}
	st.viaLive = uistate.ApplyUpdate(st.viaLive, lupd)
	if st.steps%7 == 0 { // sometimes take a snapshot, which makes the reducer copy
		if got := uiJSON(tb, st.live.State()); got != want {
			tb.Fatalf("step %d: UIReducer state\n%s\nwant\n%s", st.steps, got, want)
		}
	}
	if upd.Empty() {
		st.empty++
	}
	st.updates += len(upd.Items)
	st.state = next
	st.steps++
}

func (st *uiStepper) finish() {
	tb := st.tb
	tb.Helper()
	want := uiJSON(tb, st.state)
	for name, s := range map[string]uistate.UIState{"live state": st.live.State(), "live updates": st.viaLive} {
		if got := uiJSON(tb, s); got != want {
			tb.Fatalf("%s:\n%s\nwant\n%s", name, got, want)
		}
	}
}

func TestReduceTimeline(t *testing.T) {
	created := core.Event{Seq: 1, Kind: core.EventSessionCreated, Session: uiSess, Time: uiAt(1),
		Title: "fix the build", Status: core.StatusIdle}
	tests := []struct {
		name   string
		events []core.Event
		want   []string
		check  func(t *testing.T, s uistate.UIState)
	}{
		{
			name: "two turns",
			events: []core.Event{created,
				uiHuman(2, "m1", "hi"),
				uiStatus(3, "", core.StatusWorking),
				uiAssistant(4, "m2", "**on it**"),
				uiOutput(5, "a", false), uiOutput(6, "ab", false), uiOutput(7, "abc", true),
				uiTurn(8),
				uiStatus(9, "", core.StatusIdle),
				uiHuman(10, "m3", "again"),
				uiOutput(11, "x", false),
			},
			want: []string{
				`user msg:m1 "hi"`,
				`assistant msg:m2 "**on it**"`,
				`output output:0 "abc" final`,
				`user msg:m3 "again"`,
				`output output:1 "x"`,
			},
			check: func(t *testing.T, s uistate.UIState) {
				if s.Title != "fix the build" || s.Status != core.StatusIdle || !s.Busy || s.Turn != 1 || s.Seq != 11 {
					t.Errorf("scalars: %+v", s)
				}
				if out := s.Items[2]; !out.Time.Equal(uiAt(5)) || !out.Updated.Equal(uiAt(7)) || out.Role != core.RoleAssistant {
					t.Errorf("output item: %+v", out)
				}
			},
		},
		{
			name:   "turn complete finalises the output and clears busy",
			events: []core.Event{created, uiOutput(2, "partial", false), uiTurn(3), uiTurn(4), uiOutput(5, "next", false)},
			want:   []string{`output output:0 "partial" final`, `output output:2 "next"`},
			check: func(t *testing.T, s uistate.UIState) {
				if s.Turn != 2 || !s.Busy {
					t.Errorf("turn %d busy %v", s.Turn, s.Busy)
				}
			},
		},
		{
			name: "tool groups split by assistant messages",
			events: []core.Event{created,
				uiTool(2, "t1", "grep", "running"),
				uiTool(3, "t2", "read", "running"),
				uiTool(4, "t1", "", "ok"),
				uiAssistant(5, "m1", "found it"),
				uiTool(6, "t3", "edit", "running"),
				uiTool(7, "t2", "", "ok"), // an earlier group's call ends
				uiTool(8, "t3", "", "error"),
				uiAssistant(9, "m2", "failed"),
				uiTool(10, "t4", "edit", "running"),
			},
			want: []string{
				`tools t1=ok,t2=ok`,
				`assistant msg:m1 "found it"`,
				`tools t3=error`,
				`assistant msg:m2 "failed"`,
				`tools t4=running`,
			},
			check: func(t *testing.T, s uistate.UIState) {
				c := s.Items[0].Tools[0]
				if c.Name != "grep" || !c.Time.Equal(uiAt(2)) || !c.Updated.Equal(uiAt(4)) {
					t.Errorf("t1 kept its name and start: %+v", c)
				}
				if !s.Busy {
					t.Error("a running tool call means busy")
				}
			},
		},
		{
			name: "in-place updates do not end a tools group",
			events: []core.Event{created,
				uiOutput(2, "a", false),
				uiTool(3, "t1", "grep", "running"),
				uiOutput(4, "ab", false), // updates output:0 in place
				uiTool(5, "t2", "read", "running"),
			},
			want: []string{`output output:0 "ab"`, `tools t1=running,t2=running`},
		},
		{
			name: "question then answer",
			events: []core.Event{created,
				uiQuestion(2, "q1", "deploy?", "yes", "no"),
				uiStatus(3, "", core.StatusWaiting),
				uiAnswerEv(4, "q1", "m8", "yes"),
				uiAnswerEv(5, "q7", "m10", "what question?"),
				uiAnswerEv(6, "q1", "m9", "no"),             // changed their mind
				uiQuestion(7, "q1", "deploy?", "yes", "no"), // redelivered question keeps the answer
			},
			want: []string{
				`question q:q1 "deploy?" [yes no] -> "no"`,
				`user msg:m10 "what question?"`,
			},
			check: func(t *testing.T, s uistate.UIState) {
				if a := s.Items[0].Answer; a.MessageID != "m9" || a.Origin != "web" || !a.Time.Equal(uiAt(6)) {
					t.Errorf("answer: %+v", a)
				}
				if s.Items[1].QuestionID != "q7" {
					t.Errorf("orphan answer keeps its question id: %+v", s.Items[1])
				}
				if s.Busy || s.Status != core.StatusWaiting {
					t.Errorf("busy %v status %s", s.Busy, s.Status)
				}
			},
		},
		{
			name: "redelivered and doubly published messages appear once",
			events: []core.Event{created,
				uiHuman(5, "m1", "hi"),
				uiHuman(5, "m1", "hi"),    // same seq: ignored
				uiHuman(3, "m1", "hi"),    // older seq: ignored
				uiHuman(6, "m1", "hi"),    // new seq, same message
				uiQueued(7, "m1", "hi"),   // also published as queued
				uiQueued(8, "m2", "more"), // queued first …
				uiHuman(9, "m2", "more"),  // … then as a human message
				uiAssistant(0, "m3", "live"),
				uiAssistant(0, "m3", "live"),
				uiTool(10, "t1", "grep", "running"),
				uiTool(10, "t1", "grep", "ok"), // same seq: ignored
			},
			want: []string{
				`user msg:m1 "hi" queued`,
				`user msg:m2 "more" queued`,
				`assistant msg:m3 "live"`,
				`tools t1=running`,
			},
			check: func(t *testing.T, s uistate.UIState) {
				if s.Seq != 10 {
					t.Errorf("seq %d, want 10", s.Seq)
				}
			},
		},
		{
			name: "notices, cancel, other sessions and unknown kinds",
			events: []core.Event{created,
				uiMsg(core.EventNotice, 2, "n1", "🎤 Transcribing…"),
				{Seq: 3, Kind: core.EventCancel, Session: uiSess, Origin: "telegram"},
				{Seq: 4, Kind: core.EventNotice, Session: uiSess, Text: "no message", SourceOnly: true},
				{Seq: 5, Kind: core.EventHumanMessage, Session: "01JOTHER00000000000000000", Message: &core.Message{ID: "x", Content: "elsewhere"}},
				{Seq: 6, Kind: "future_kind", Session: uiSess},
				{Seq: 7, Kind: core.EventToolActivity, Session: uiSess}, // no tool
				{Seq: 8, Kind: core.EventHumanMessage, Session: uiSess}, // no message
			},
			want: []string{
				`notice msg:n1 "🎤 Transcribing…"`,
				`notice notice:1 "" cancel`,
				`notice notice:2 "no message"`,
			},
			check: func(t *testing.T, s uistate.UIState) {
				if s.Seq != 8 || !s.Items[2].SourceOnly || s.Items[1].Origin != "telegram" || s.Items[0].Role != core.RoleSystem {
					t.Errorf("state: %+v", s)
				}
			},
		},
		{
			name: "attachments lose their daemon path",
			events: func() []core.Event {
				e := uiHuman(2, "m1", "see file")
				e.Message.Attachments = []core.Attachment{{Name: "a.png", Mime: "image/png", Size: 3, Path: "/var/lib/parley/x"}}
				return []core.Event{e}
			}(),
			want: []string{`user msg:m1 "see file"`},
			check: func(t *testing.T, s uistate.UIState) {
				want := []uistate.UIAttachment{{Name: "a.png", Mime: "image/png", Size: 3}}
				if !slices.Equal(s.Items[0].Attachments, want) || strings.Contains(uiJSON(t, s), "/var/lib") {
					t.Errorf("attachments: %+v", s.Items[0].Attachments)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := uiNewStepper(t, uistate.UIState{})
			for _, e := range tt.events {
				st.step(e)
			}
			st.finish()
			if got := uiSummary(st.state); !slices.Equal(got, tt.want) {
				t.Errorf("timeline:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if got, want := uiJSON(t, uistate.ReduceAll(uistate.UIState{}, tt.events)), uiJSON(t, st.state); got != want {
				t.Errorf("ReduceAll:\n%s\nwant\n%s", got, want)
			}
			if tt.check != nil {
				tt.check(t, st.state)
			}
		})
	}
}

// uiGen makes a random-ish but valid-looking event stream from a byte source:
// ids are drawn from small sets so that redeliveries and updates happen.
type uiGen struct {
	next func() byte
	seq  uint64
}

func (g *uiGen) event() core.Event {
	k, p, s := g.next(), g.next(), g.next()
	var seq uint64
	switch s % 8 {
	case 0: // live output and tests: no seq
	case 1: // redelivery of the last one
		seq = g.seq
	case 2: // an old one
		seq = g.seq / 2
	default:
		g.seq++
		seq = g.seq
	}
	mid := fmt.Sprintf("m%d", p%12)
	switch k % 13 {
	case 0:
		return uiStatus(seq, fmt.Sprintf("title %d", p%3),
			[]core.Status{"", core.StatusIdle, core.StatusWorking, core.StatusWaiting, core.StatusClosed}[p%5])
	case 1:
		return uiHuman(seq, mid, "human "+mid)
	case 2:
		return uiQueued(seq, mid, "human "+mid)
	case 3:
		return uiAssistant(seq, mid, "assistant "+mid)
	case 4:
		return uiOutput(seq, strings.Repeat("o", int(p%9)), p%5 == 0)
	case 5:
		return uiTurn(seq)
	case 6:
		if p%2 == 0 {
			return core.Event{Seq: seq, Kind: core.EventNotice, Session: uiSess, Time: uiAt(seq), Text: "notice", SourceOnly: p%4 == 0}
		}
		return uiMsg(core.EventNotice, seq, mid, "notice "+mid)
	case 7:
		return core.Event{Seq: seq, Kind: core.EventCancel, Session: uiSess, Time: uiAt(seq)}
	case 8:
		return uiQuestion(seq, fmt.Sprintf("q%d", p%3), "question", "a", "b")
	case 9:
		return uiAnswerEv(seq, fmt.Sprintf("q%d", p%4), mid, fmt.Sprintf("answer %d", p%2))
	case 10:
		id := fmt.Sprintf("t%d", p%6)
		if p%6 == 5 {
			id = ""
		}
		if p%17 == 0 {
			return core.Event{Seq: seq, Kind: core.EventToolActivity, Session: uiSess}
		}
		return uiTool(seq, id, "tool", []string{"running", "ok", "error", ""}[p/6%4])
	case 11:
		e := uiHuman(seq, mid, "elsewhere")
		e.Session = "01JOTHER00000000000000000"
		return e
	default:
		return core.Event{Seq: seq, Kind: "future_kind", Session: uiSess}
	}
}

func uiRandomEvents(seed uint64, n int) []core.Event {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	g := uiGen{next: func() byte { return byte(r.Uint32()) }}
	events := make([]core.Event, n)
	for i := range events {
		events[i] = g.event()
	}
	return events
}

func TestUIStateApplyUpdateReproducesState(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			events := uiRandomEvents(seed, 700)
			st := uiNewStepper(t, uistate.NewUIState(uiSess))
			for _, e := range events {
				st.step(e)
			}
			st.finish()
			if len(st.state.Items) < 100 || st.updates == 0 || st.empty == 0 {
				t.Fatalf("stream too tame: %d items, %d updated items, %d empty updates", len(st.state.Items), st.updates, st.empty)
			}
			if got, want := uiJSON(t, uistate.ReduceAll(uistate.NewUIState(uiSess), events)), uiJSON(t, st.state); got != want {
				t.Fatalf("ReduceAll differs from folding Reduce")
			}
		})
	}
}

func TestReduceAllEqualsFold(t *testing.T) {
	events := uiRandomEvents(42, 3000)
	fold := uistate.UIState{}
	for _, e := range events {
		fold = uistate.Reduce(fold, e)
	}
	want := uiJSON(t, fold)
	if got := uiJSON(t, uistate.ReduceAll(uistate.UIState{}, events)); got != want {
		t.Fatal("ReduceAll(all) differs from folding Reduce")
	}
	// In chunks, each ReduceAll starting from the previous result.
	s := uistate.UIState{}
	for chunk := range slices.Chunk(events, 97) {
		s = uistate.ReduceAll(s, chunk)
	}
	if got := uiJSON(t, s); got != want {
		t.Fatal("chunked ReduceAll differs from folding Reduce")
	}
	if got := uiJSON(t, uistate.ReduceAll(fold, nil)); got != want {
		t.Fatal("ReduceAll with no events changed the state")
	}
}

func TestReduceDoesNotMutatePrev(t *testing.T) {
	// ReduceAll leaves spare capacity in Items and in the last tools
	// group's Tools: exactly where an append could write into prev.
	prev := uistate.ReduceAll(uistate.UIState{}, []core.Event{
		uiHuman(1, "m1", "hi"),
		uiQuestion(2, "q1", "sure?", "y", "n"),
		uiOutput(3, "out", false),
		uiTool(4, "t1", "grep", "running"),
		uiTool(5, "t2", "read", "running"),
		uiTool(6, "t0", "ls", "running"), // three calls: len 3, cap 4
	})
	saved := uiJSON(t, prev)
	siblings := []core.Event{
		uiTool(7, "t3", "edit", "running"),
		uiTool(7, "t4", "test", "running"),
		uiTool(7, "t1", "", "ok"),
		uiAssistant(7, "m2", "a"),
		uiHuman(7, "m3", "b"),
		uiQueued(7, "m1", "hi"),
		uiOutput(7, "out more", true),
		uiTurn(7),
		uiAnswerEv(7, "q1", "m4", "y"),
		uiStatus(7, "renamed", core.StatusWorking),
	}
	var results []uistate.UIState
	var resultJSON []string
	for _, e := range siblings {
		next := uistate.Reduce(prev, e)
		if got := uiJSON(t, prev); got != saved {
			t.Fatalf("Reduce(%s) modified prev:\n%s\nwas\n%s", e.Kind, got, saved)
		}
		n2, _ := uistate.ReduceWithUpdate(prev, e)
		n3 := uistate.ReduceAll(prev, []core.Event{e})
		r := uistate.NewUIReducer(prev)
		r.Apply(e)
		if got := uiJSON(t, prev); got != saved {
			t.Fatalf("reducing %s modified prev", e.Kind)
		}
		for _, other := range []uistate.UIState{n2, n3, r.State()} {
			if uiJSON(t, other) != uiJSON(t, next) {
				t.Fatalf("%s: reducers disagree", e.Kind)
			}
		}
		results = append(results, next)
		resultJSON = append(resultJSON, uiJSON(t, next))
	}
	// Every sibling still shows what its own event made of prev.
	for i, s := range results {
		if got := uiJSON(t, s); got != resultJSON[i] {
			t.Fatalf("sibling %d (%s) changed by a later Reduce:\n%s\nwas\n%s", i, siblings[i].Kind, got, resultJSON[i])
		}
	}
	if got := uiSummary(results[0])[3]; got != "tools t1=running,t2=running,t0=running,t3=running" {
		t.Fatalf("sibling 0: %s", got)
	}
	if got := uiSummary(results[1])[3]; got != "tools t1=running,t2=running,t0=running,t4=running" {
		t.Fatalf("sibling 1: %s", got)
	}

	// A UIReducer's earlier State is not changed by later Apply calls.
	r := uistate.NewUIReducer(prev)
	r.Apply(uiTool(7, "t3", "edit", "running"))
	held := r.State()
	heldJSON := uiJSON(t, held)
	upd := r.Apply(uiTool(8, "t4", "test", "running"))
	updJSON, _ := json.Marshal(upd)
	r.Apply(uiTool(9, "t5", "test", "running"))
	r.Apply(uiTool(10, "t4", "", "ok"))
	r.Apply(uiTool(11, "t3", "", "ok"))
	r.Apply(uiHuman(12, "m9", "x"))
	if got := uiJSON(t, held); got != heldJSON {
		t.Fatalf("UIReducer modified a state it returned:\n%s\nwas\n%s", got, heldJSON)
	}
	if got, _ := json.Marshal(upd); string(got) != string(updJSON) {
		t.Fatalf("UIReducer modified an update it returned:\n%s\nwas\n%s", got, updJSON)
	}
}

func TestUIStateDiffUnrelatedStates(t *testing.T) {
	a := uistate.ReduceAll(uistate.NewUIState(uiSess), uiRandomEvents(7, 300))
	b := uistate.ReduceAll(uistate.NewUIState(uiSess), uiRandomEvents(8, 200))
	tests := []struct {
		name       string
		prev, next uistate.UIState
	}{
		{"a to b", a, b},
		{"b to a", b, a},
		{"to empty", a, uistate.NewUIState(uiSess)},
		{"from zero", uistate.UIState{}, a},
		{"truncated", a, uistate.UIState{Version: a.Version, Session: a.Session, Items: a.Items[:len(a.Items)/2]}},
		{"same", a, a},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := uistate.Diff(tt.prev, tt.next)
			if got, want := uiJSON(t, uistate.ApplyUpdate(tt.prev, u)), uiJSON(t, tt.next); got != want {
				t.Fatalf("ApplyUpdate(Diff) =\n%s\nwant\n%s", got, want)
			}
			if tt.name == "same" && !u.Empty() {
				t.Fatalf("diff of a state with itself: %+v", u)
			}
		})
	}
}

func TestUIStateJSON(t *testing.T) {
	s := uistate.ReduceAll(uistate.NewUIState(uiSess), []core.Event{
		{Seq: 1, Kind: core.EventSessionCreated, Session: uiSess, Title: "t", Status: core.StatusWorking},
		uiTool(2, "t1", "grep", "running"),
	})
	b, err := json.Marshal(uistate.Snapshot(s))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"type":"ui_state_snapshot","v":"ui_state_v1","seq":2,"state":{"v":"ui_state_v1","seq":2,` +
		`"session_id":"01JSESSION0000000000000000","title":"t","status":"working","busy":true,"turn":0,"items":[` +
		`{"id":"tools:0","kind":"ToolCalls","ts":"2026-03-01T12:00:02Z","author":"assistant",` +
		`"tools":[{"id":"t1","name":"grep","status":"running","ts":"2026-03-01T12:00:02Z"}]}]}}`
	if string(b) != want {
		t.Fatalf("snapshot JSON\n%s\nwant\n%s", b, want)
	}
	if b, _ := json.Marshal(uistate.Snapshot(uistate.UIState{})); !strings.Contains(string(b), `"items":[]`) {
		t.Fatalf("empty snapshot has null items: %s", b)
	}
	s, u := uistate.ReduceWithUpdate(s, uiStatus(3, "", core.StatusIdle))
	b, _ = json.Marshal(u)
	if want := `{"type":"ui_state_delta","v":"ui_state_v1","seq":3,"session_id":"01JSESSION0000000000000000","status":"idle","busy":false}`; string(b) != want {
		t.Fatalf("update JSON\n%s\nwant\n%s", b, want)
	}
	s, _ = uistate.ReduceWithUpdate(s, uiQueued(4, "m1", "hi"))
	for _, e := range []core.Event{uiQueued(5, "m1", "hi"), uiHuman(6, "m1", "hi"), uiTool(7, "t1", "grep", "running")} {
		if _, u := uistate.ReduceWithUpdate(s, e); !u.Empty() || u.Seq != e.Seq {
			t.Errorf("redelivered %s: update %+v, want empty at seq %d", e.Kind, u, e.Seq)
		}
	}
}

// uiBatch is a long realistic session: turns with streamed output, tool
// calls and the occasional question.
func uiBatch(n int) []core.Event {
	events := make([]core.Event, 0, n)
	var seq uint64
	add := func(e core.Event) { events = append(events, e) }
	for turn := 0; len(events) < n; turn++ {
		seq++
		add(uiHuman(seq, fmt.Sprintf("h%d", turn), "please"))
		for step := 0; step < 5; step++ {
			id := fmt.Sprintf("t%d.%d", turn, step)
			seq++
			add(uiTool(seq, id, "bash", "running"))
			seq++
			add(uiOutput(seq, strings.Repeat("x", step+1), false))
			seq++
			add(uiTool(seq, id, "", "ok"))
		}
		if turn%10 == 0 {
			seq++
			add(uiQuestion(seq, fmt.Sprintf("q%d", turn), "ok?", "y", "n"))
			seq++
			add(uiAnswerEv(seq, fmt.Sprintf("q%d", turn), fmt.Sprintf("a%d", turn), "y"))
		}
		seq++
		add(uiAssistant(seq, fmt.Sprintf("m%d", turn), "done"))
		seq++
		add(uiOutput(seq, "final", true))
		seq++
		add(uiTurn(seq))
	}
	return events[:n]
}

func TestReduceAllLargeBatch(t *testing.T) {
	events := uiBatch(100_000)
	s := uistate.ReduceAll(uistate.NewUIState(uiSess), events)
	uiCheckInvariants(t, s)
	if s.Seq != events[len(events)-1].Seq {
		t.Fatalf("seq %d", s.Seq)
	}
	turns := int(s.Turn)
	if turns < 4000 || len(s.Items) < 5*turns {
		t.Fatalf("%d turns, %d items", turns, len(s.Items))
	}
	// The live path reaches the same state.
	r := uistate.NewUIReducer(uistate.NewUIState(uiSess))
	for _, e := range events {
		r.Apply(e)
	}
	if uiJSON(t, r.State()) != uiJSON(t, s) {
		t.Fatal("UIReducer differs from ReduceAll")
	}
	// Redelivering the whole batch changes nothing.
	if again := uistate.ReduceAll(s, events); uiJSON(t, again) != uiJSON(t, s) {
		t.Fatal("redelivered batch changed the state")
	}
}

func BenchmarkReduceAll(b *testing.B) {
	events := uiBatch(10_000)
	b.ReportAllocs()
	for b.Loop() {
		uistate.ReduceAll(uistate.UIState{}, events)
	}
}

func BenchmarkUiReducerApply(b *testing.B) {
	events := uiBatch(10_000)
	b.ReportAllocs()
	for b.Loop() {
		r := uistate.NewUIReducer(uistate.UIState{})
		for _, e := range events {
			r.Apply(e)
		}
	}
}

// BenchmarkReduceFold shows what ReduceAll saves: Reduce copies the items.
func BenchmarkReduceFold(b *testing.B) {
	events := uiBatch(10_000)
	b.ReportAllocs()
	for b.Loop() {
		s := uistate.UIState{}
		for _, e := range events {
			s = uistate.Reduce(s, e)
		}
	}
}

func FuzzReduce(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 3, 1, 1, 1, 2, 1, 3, 4, 2, 3, 4, 3, 3, 5, 0, 3, 4, 4, 3})
	f.Add([]byte{10, 0, 3, 10, 1, 3, 3, 0, 3, 10, 7, 3, 10, 13, 0, 8, 0, 3, 9, 0, 3, 9, 3, 3})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, 0123456789 times"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 900 {
			data = data[:900]
		}
		i := 0
		g := uiGen{next: func() byte {
			if i >= len(data) {
				return 0
			}
			i++
			return data[i-1]
		}}
		var events []core.Event
		for i < len(data) {
			events = append(events, g.event())
		}
		st := uiNewStepper(t, uistate.UIState{})
		for _, e := range events {
			st.step(e)
		}
		st.finish()
		if got, want := uiJSON(t, uistate.ReduceAll(uistate.UIState{}, events)), uiJSON(t, st.state); got != want {
			t.Fatalf("ReduceAll:\n%s\nfold:\n%s", got, want)
		}
		if got, want := uiJSON(t, uistate.ApplyUpdate(uistate.UIState{}, uistate.Diff(uistate.UIState{}, st.state))), uiJSON(t, st.state); got != want {
			t.Fatalf("ApplyUpdate(Diff(zero, s)):\n%s\nwant\n%s", got, want)
		}
	})
}
