package orchestrator

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
)

// allowingAgent is the orchestrator's agents when the default is d, as an ACP
// agent with permissions = "allow".
func allowingAgent(d agent.Driver) map[string]Agent {
	return map[string]Agent{"": {Driver: d, Title: "Codex", Kind: "codex", AllowPermissions: true}}
}

// toolEvents returns the session's tool events' kinds, and its approvals.
func toolEvents(st *stack, id core.SessionID) ([]core.EventKind, []core.ToolCall) {
	var kinds []core.EventKind
	var approvals []core.ToolCall
	for _, e := range st.events(id, core.EventToolCall, core.EventToolOutput, core.EventToolApproval) {
		kinds = append(kinds, e.Kind)
		if e.Kind == core.EventToolApproval {
			approvals = append(approvals, *e.Call)
		}
	}
	return kinds, approvals
}

// TestPermissionsAllowed: with AllowPermissions (an ACP agent, permissions
// = "allow") a permission prompt is allowed once, nobody is asked, and the
// call's ToolGroup records the approval as parley's, by its configuration.
func TestPermissionsAllowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) { ft.Bash("toolu_1", "touch f", true, "made") })
		startOrchestrator(t, st, fc, func(o *Options) { o.Agents = allowingAgent(fc) })
		st.say(id, ann, "make f")
		settle(time.Second)
		d := fc.procsOf(string(id))[0].decided()
		if len(d) != 1 || !d[0].Allow || d[0].Always {
			t.Fatalf("decisions %+v", d)
		}
		if len(st.events(id, core.EventQuestion)) != 0 {
			t.Fatal("people were asked")
		}
		kinds, approvals := toolEvents(st, id)
		if !slices.Equal(kinds, []core.EventKind{core.EventToolCall, core.EventToolApproval, core.EventToolOutput}) {
			t.Fatalf("tool events %v", kinds)
		}
		a := approvals[0]
		if a.CallID != "toolu_1" || a.Decision != core.DecisionApprove || a.Actor.ID != "parley" || a.Actor.Name != `parley (permissions = "allow")` {
			t.Fatalf("approval %+v", a)
		}
		if sess := st.session(id); sess.Tools[0].Digest != "" {
			t.Fatalf("the approval was kept as people's decision: %+v", sess.Tools[0])
		}
	})
}

// TestToolAllowedRecorded: a call the driver allowed itself (ToolAllowed:
// an ACP agent's call of parley's own tools) is recorded as approved by
// parley on the driver's ground, under AskPermissions too.
func TestToolAllowedRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.emit(agent.ToolUse{ID: "call_1", Name: "Tool: parley/ui.ask", Show: `parley/ui.ask {"question":"ok?"}`})
			ft.emit(agent.ToolAllowed{ToolUseID: "call_1", By: "its own tools"})
			ft.emit(agent.ToolResult{ToolUseID: "call_1", Stdout: "yes"})
		})
		startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "ask")
		settle(time.Second)
		kinds, approvals := toolEvents(st, id)
		if !slices.Equal(kinds, []core.EventKind{core.EventToolCall, core.EventToolApproval, core.EventToolOutput}) {
			t.Fatalf("tool events %v", kinds)
		}
		if a := approvals[0]; a.CallID != "call_1" || a.Decision != core.DecisionApprove || a.Actor.Name != "parley (its own tools)" {
			t.Fatalf("approval %+v", a)
		}
	})
}

// TestAgentEndsTurnOnDenial: an agent that ends its turn when a call is
// denied although people chose to continue (Codex: StopDenied without an
// interrupt) has the turn's end said as the agent's doing, not as a
// cancel or a stop people asked for.
func TestAgentEndsTurnOnDenial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("before")
			if d := ft.bash("call_1", map[string]any{"command": "touch f"}, true, false, ""); !d.Allow {
				ft.end(agent.Result{Stop: agent.StopDenied})
			}
		})
		startOrchestrator(t, st, fc, func(o *Options) {
			o.Agents = map[string]Agent{"": {Driver: fc, Title: "Codex", Kind: "codex", AskPermissions: true}}
		})
		st.say(id, ann, "make f")
		settle(time.Second)
		st.decide(id, 2)
		settle(time.Second)
		_, finals := st.outputs(id)
		if want := "before\n\n⏹ Codex ended the turn when a tool call was denied."; !slices.Equal(finals, []string{want}) {
			t.Fatalf("final outputs %q, want %q", finals, want)
		}
	})
}

// TestAgentEndsTurnAfterDenyContinue: a turn whose call people denied and
// let go on, and that then ends with no text after the denial (OpenCode
// 1.18.33 ends it end_turn without asking its model again), says the
// agent ended it, whether it ended end_turn or cancelled (a refusal, a
// limit or an error keeps its own note); one whose agent answers after
// the denial (Claude Code's model goes on) says nothing more.
func TestAgentEndsTurnAfterDenyContinue(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool
		after  string
		stop   agent.StopReason
		final  string
	}{
		{"quiet end_turn", true, "", agent.StopEndTurn, "before\n\n⏹ OpenCode ended the turn when a tool call was denied."},
		{"no text at all", false, "", agent.StopEndTurn, "⏹ OpenCode ended the turn when a tool call was denied."},
		{"quiet cancelled", true, "", agent.StopCancelled, "before\n\n⏹ OpenCode ended the turn when a tool call was denied."},
		{"goes on", true, "I left it.", agent.StopEndTurn, "before\n\nI left it."},
		{"refusal says more", true, "", agent.StopRefusal, "before\n\n⏹ The model refused to go on with this request."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStack(t, t.TempDir())
				id := st.create()
				fc := newFakeClaude(func(ft *fakeTurn) {
					if tc.before {
						ft.Say("before")
					}
					ft.bash("call_1", map[string]any{"command": "touch f"}, true, false, "")
					if tc.after != "" {
						ft.Say(tc.after)
					}
					ft.end(agent.Result{Stop: tc.stop})
				})
				startOrchestrator(t, st, fc, func(o *Options) {
					o.Agents = map[string]Agent{"": {Driver: fc, Title: "OpenCode", Kind: "opencode", AskPermissions: true}}
				})
				st.say(id, ann, "make f")
				settle(time.Second)
				st.decide(id, 2)
				settle(time.Second)
				if _, finals := st.outputs(id); !slices.Equal(finals, []string{tc.final}) {
					t.Fatalf("final outputs %q, want %q", finals, tc.final)
				}
			})
		})
	}
}
