package uistate

import (
	"slices"

	"github.com/parley-chat/parley/core"
)

// ToolGroup items: one per tool call the agent's runtime reported
// (EventToolCall), with id "tool:<call id>", placed where the call
// started. Its output (EventToolOutput) and the people's decisions on its
// approval (EventToolApproval) fill in the same item, so the timeline reads
// a call, then its output, then what followed, however the reports
// interleave. A repeated report changes nothing but the command shown,
// when it brings another (a running call the agent told more of); a report about a call
// whose start is not in the state (the log lost it) starts the item then.

func toolGroupID(callID string) string { return "tool:" + callID }

func (r *uiReducer) toolGroup(e core.Event) {
	c := e.Call
	if c == nil || c.CallID == "" {
		return
	}
	if e.Kind == core.EventToolCall {
		r.s.Busy = true
	}
	p, ok := r.find(toolGroupID(c.CallID))
	if !ok {
		r.add(UIItem{ID: toolGroupID(c.CallID), Type: UIItemToolGroup, Time: e.Time, Origin: e.Origin, Role: core.RoleAssistant,
			UIToolGroup: UIToolGroup{Tool: c.Tool, CallID: c.CallID, Cmd: c.Cmd}})
		if e.Kind == core.EventToolCall {
			return
		}
		p = len(r.s.Items) - 1
	}
	it := r.s.Items[p]
	if it.Type != UIItemToolGroup {
		return
	}
	g := &it.UIToolGroup
	switch e.Kind {
	case core.EventToolCall:
		// Known already: a report again shows a new command, if any.
		if c.Cmd == "" || c.Cmd == g.Cmd {
			return
		}
		g.Cmd = c.Cmd
	case core.EventToolOutput:
		if g.ExitCode != nil || g.Stdout != "" || g.Stderr != "" {
			return // the first output is kept
		}
		g.Stdout, g.Stderr = c.Stdout, c.Stderr
		if c.ExitCode != nil {
			code := *c.ExitCode
			g.ExitCode = &code
		}
	case core.EventToolApproval:
		g.Approvals = append(slices.Clip(g.Approvals), UIApproval{Decision: c.Decision, Actor: c.Actor, Origin: e.Origin, Time: e.Time})
	}
	it.Updated = e.Time
	r.set(p, it)
}
