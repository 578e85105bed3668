package orchestrator

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// TestApprovals: a permission prompt becomes an approval people answer on
// their platform; the decision goes back to Claude Code: approve allows,
// deny and continue denies with a message and the turn goes on, deny and
// abort denies and ends the turn, a timeout denies and withdraws the
// question. The call's ToolGroup records it all.
func TestApprovals(t *testing.T) {
	for _, tc := range []struct {
		name     string
		option   int // 0: nobody answers
		allow    bool
		message  string
		final    string
		decision string
	}{
		{"approve", 1, true, "", "before\n\nafter", core.DecisionApprove},
		{"deny and continue", 2, false, "do not retry it", "before\n\nafter", core.DecisionDenyContinue},
		{"deny and abort", 3, false, "stopped the turn", "before\n\n⏹ Stopped: a tool call was denied.", core.DecisionDenyAbort},
		{"timeout", 0, false, "Nobody approved", "before\n\nafter", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStack(t, t.TempDir())
				id := st.create()
				fc := newFakeClaude(func(ft *fakeTurn) {
					ft.Say("before")
					ft.Bash("toolu_1", "touch f", true, "")
					ft.Say("after")
				})
				startOrchestrator(t, st, fc, nil)
				st.say(id, ann, "make f")
				settle(time.Second)
				sess := st.session(id)
				if len(sess.Questions) != 1 || sess.Status != core.StatusWaiting {
					t.Fatalf("questions %+v, status %s", sess.Questions, sess.Status)
				}
				if !strings.Contains(sess.Questions[0].Text, "touch f") || !slices.Equal(sess.Questions[0].Options, delivery.ApprovalOptions) {
					t.Fatalf("question %+v", sess.Questions[0])
				}
				qid := sess.Questions[0].ID
				if tc.option > 0 {
					st.decide(id, tc.option)
					settle(time.Second)
				} else {
					settle(DefaultApprovalTimeout + time.Second)
				}
				proc := fc.procsOf(string(id))[0]
				d := proc.decided()
				if len(d) != 1 || d[0].Allow != tc.allow || !strings.Contains(d[0].Message, tc.message) {
					t.Fatalf("decisions %+v", d)
				}
				if d[0].Interrupt != (tc.option == 3) {
					t.Fatalf("interrupt %v", d[0].Interrupt)
				}
				_, finals := st.outputs(id)
				if !slices.Equal(finals, []string{tc.final}) {
					t.Fatalf("final outputs %q, want %q", finals, tc.final)
				}
				calls := st.events(id, core.EventToolCall, core.EventToolOutput, core.EventToolApproval)
				var kinds []core.EventKind
				for _, e := range calls {
					kinds = append(kinds, e.Kind)
					if e.Call.CallID != "toolu_1" {
						t.Fatalf("call %+v", e.Call)
					}
					if e.Kind == core.EventToolCall && (e.Call.Tool != "Bash" || e.Call.Cmd != "touch f") {
						t.Fatalf("call %+v", e.Call)
					}
					if e.Kind == core.EventToolApproval && e.Call.Decision != tc.decision {
						t.Fatalf("decision %+v", e.Call)
					}
				}
				want := []core.EventKind{core.EventToolCall, core.EventToolOutput}
				if tc.decision != "" {
					want = []core.EventKind{core.EventToolCall, core.EventToolApproval, core.EventToolOutput}
				}
				if !slices.Equal(kinds, want) {
					t.Fatalf("tool events %v, want %v", kinds, want)
				}
				if tc.option == 0 {
					if len(st.session(id).Questions) != 0 {
						t.Fatal("the question was not withdrawn")
					}
					if len(st.events(id, core.EventQuestionClosed)) != 1 {
						t.Fatal("no question_closed event")
					}
					_, err := st.svc.Handle(t.Context(), core.Command{Kind: core.Answer, Session: id, Origin: platform, Actor: ann, QuestionID: qid, Option: 1})
					if err == nil || !errors.Is(err, core.ErrInvalid) {
						t.Fatalf("a late click: %v, want it refused", err)
					}
				}
				if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
					t.Fatalf("%d turns completed", n)
				}
			})
		})
	}
}

// TestCancelWhileAsking: /cancel during an approval withdraws the question,
// denies the call and ends the turn.
func TestCancelWhileAsking(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Bash("toolu_1", "rm -rf build", true, "")
			ft.Say("after")
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "clean")
		settle(time.Second)
		if len(st.session(id).Questions) != 1 {
			t.Fatal("no approval asked")
		}
		st.control(id, core.Cancel)
		settle(time.Second)
		if q := st.session(id).Questions; len(q) != 0 {
			t.Fatalf("questions %+v after /cancel", q)
		}
		d := fc.procsOf(string(id))[0].decided()
		if len(d) != 1 || d[0].Allow || !d[0].Interrupt {
			t.Fatalf("decisions %+v", d)
		}
		_, finals := st.outputs(id)
		if !slices.Equal(finals, []string{cancelled}) {
			t.Fatalf("final outputs %q", finals)
		}
		if st.session(id).Status != core.StatusIdle {
			t.Fatalf("status %s", st.session(id).Status)
		}
	})
}

// TestPromptWithdrawn: a permission prompt Claude Code withdraws takes its
// question away from the people (a late click decides nothing), nobody
// answers the agent, and the turn ends.
func TestPromptWithdrawn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) { ft.Withdrawn("toolu_1", "touch f", 5*time.Second) })
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "make f")
		settle(time.Second)
		q := st.session(id).Questions
		if len(q) != 1 {
			t.Fatalf("questions %+v, want the approval", q)
		}
		settle(6 * time.Second) // withdrawn; the turn has not ended yet
		if q := st.session(id).Questions; len(q) != 0 {
			t.Fatalf("questions %+v after the prompt was withdrawn", q)
		}
		settle(10 * time.Second)
		if d := fc.procsOf(string(id))[0].decided(); len(d) != 0 {
			t.Fatalf("the agent was answered %+v for a withdrawn prompt", d)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed, want 1", n)
		}
	})
}

// TestPermissionsNotAsked: without AskPermissions a prompt that arrives
// anyway is denied, never allowed, and nobody is asked.
func TestPermissionsNotAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) { ft.Bash("toolu_1", "touch f", true, "") })
		startOrchestrator(t, st, fc, func(o *Options) { o.Agents = claudeAgent(fc, false) })
		st.say(id, ann, "make f")
		settle(time.Second)
		d := fc.procsOf(string(id))[0].decided()
		if len(d) != 1 || d[0].Allow {
			t.Fatalf("decisions %+v", d)
		}
		if len(st.events(id, core.EventQuestion)) != 0 {
			t.Fatal("people were asked")
		}
	})
}

// TestApprovalBoundToInput: Claude Code's permission prompts are keyed by
// tool_use_id, and people read only the command of a call; their decision
// is bound to the call's whole input all the same. The same tool_use_id
// with the same input gets the decision made; with other input (here
// run_in_background, which the question does not show), people are asked
// again and their new answer goes back.
func TestApprovalBoundToInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		inputs := []map[string]any{
			{"command": "touch f", "description": "make f"},
			{"command": "touch f", "description": "make f"},
			{"command": "touch f", "description": "make f", "run_in_background": true},
		}
		var turn atomic.Int32
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.BashInput("toolu_1", inputs[turn.Add(1)-1], true, "")
			ft.Say("done")
		})
		startOrchestrator(t, st, fc, nil)
		open := func() int { return len(st.session(id).Questions) }

		st.say(id, ann, "make f")
		settle(time.Second)
		if open() != 1 {
			t.Fatal("the first call was not put to people")
		}
		st.decide(id, 1)
		settle(time.Second)
		st.say(id, ann, "again")
		settle(time.Second)
		if n := open(); n != 0 {
			t.Fatalf("the same call was asked again (%d questions open)", n)
		}
		st.say(id, ann, "in the background")
		settle(time.Second)
		if n := open(); n != 1 {
			t.Fatalf("the call with other input was not put to people (%d questions open)", n)
		}
		st.decide(id, 2)
		settle(time.Second)
		d := fc.procsOf(string(id))[0].decided()
		if len(d) != 3 || !d[0].Allow || !d[1].Allow || d[2].Allow || !strings.Contains(d[2].Message, "do not retry it") {
			t.Fatalf("decisions %+v, want allow, allow, then the people's denial", d)
		}
	})
}
