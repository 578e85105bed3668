package uistate

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// The UIState wire format (version ui_state_v1), as the HTTP API and the
// event stream serve it:
//
//	{"type": "ui_state_snapshot", "v": "ui_state_v1", "seq": N, "state": {…}}
//	{"type": "ui_state_updated",  "v": "ui_state_v1", "seq": N, "state": {…}}
//
// Both carry the whole state; seq is the seq of the last event the state
// includes, and a client keeps the state with the highest seq. Deltas
// (UIUpdate, type "ui_state_delta") are parley's opt-in extension for
// clients that keep a state and want only what changed.
//
// Every item carries "id", "kind" and "ts". The text of an item is "text"
// for UserMessage, Notice and Question, and "md" (markdown) for
// AssistantMarkdown and Output. A ToolGroup always carries "tool",
// "call_id", "approvals" (a list, possibly empty), "stdout", "stderr" and
// "exit_code" (null until the call ended), and "cmd" when the agent gave
// one. Items are in the order their events happened: a tool call, then its
// output (in the same ToolGroup), then the items that followed.
//
// "approvals" is the specification's: the decisions' kinds, in the order
// they were made ["approve", "deny_continue", …], and nothing else, so a
// client written against the specification reads it as such; parley adds
// one kind, "approve_always" (the person chose Always allow, which the
// agent offered: this call and those like it). Who decided,
// from where and when is parley's extension beside it,
// "approvals_detail": one object per entry of "approvals", in the same
// order, {"decision", "actor"?, "origin"?, "ts"?}, left out while there is
// no decision.

// UIToolGroup is what a ToolGroup item shows of one tool call.
type UIToolGroup struct {
	Tool   string `json:"-"`
	CallID string `json:"-"`
	// Cmd is the command or arguments as people should see them; empty
	// when the agent gave none.
	Cmd       string       `json:"-"`
	Approvals []UIApproval `json:"-"`
	Stdout    string       `json:"-"`
	Stderr    string       `json:"-"`
	// ExitCode is nil while the call runs.
	ExitCode *int `json:"-"`
}

func (g *UIToolGroup) equal(o *UIToolGroup) bool {
	return g.Tool == o.Tool && g.CallID == o.CallID && g.Cmd == o.Cmd &&
		slices.Equal(g.Approvals, o.Approvals) && g.Stdout == o.Stdout && g.Stderr == o.Stderr &&
		(g.ExitCode == o.ExitCode || g.ExitCode != nil && o.ExitCode != nil && *g.ExitCode == *o.ExitCode)
}

// UIApproval is one decision on a tool call's approval request. On the
// wire its Decision is an entry of a ToolGroup's "approvals" and the
// whole of it the entry of "approvals_detail" at the same index.
type UIApproval struct {
	Decision string      `json:"decision"` // DecisionApprove, DecisionDenyContinue, DecisionDenyAbort or DecisionApproveAlways
	Actor    core.Actor  `json:"actor,omitzero"`
	Origin   core.Origin `json:"origin,omitempty"`
	Time     time.Time   `json:"ts,omitzero"`
}

// uiItemFields is UIItem without its methods, for encoding/json.
type uiItemFields UIItem

// uiItemWire is an item as it is on the wire: its own fields plus those
// whose name depends on the kind.
type uiItemWire struct {
	uiItemFields
	Text      *string   `json:"text,omitempty"`
	MD        *string   `json:"md,omitempty"`
	Tool      *string   `json:"tool,omitempty"`
	CallID    *string   `json:"call_id,omitempty"`
	Cmd       string    `json:"cmd,omitempty"`
	Approvals *[]string `json:"approvals,omitempty"`
	// ApprovalsDetail is parley's extension: who made each decision of
	// Approvals, and when.
	ApprovalsDetail []UIApproval `json:"approvals_detail,omitempty"`
	Stdout          *string      `json:"stdout,omitempty"`
	Stderr          *string      `json:"stderr,omitempty"`
	// ExitCode is a pointer to a pointer so that a running call's
	// exit_code is written as null rather than left out.
	ExitCode **int `json:"exit_code,omitempty"`
}

// markdownKind reports whether a kind's text is markdown ("md").
func markdownKind(k UIItemType) bool { return k == UIItemAssistant || k == UIItemOutput }

// MarshalJSON writes the item in the ui_state_v1 shape of its kind.
func (it UIItem) MarshalJSON() ([]byte, error) {
	w := uiItemWire{uiItemFields: uiItemFields(it)}
	content := it.Content
	if markdownKind(it.Type) {
		w.MD = &content
	} else if it.Type != UIItemToolGroup && it.Type != UIItemTools {
		w.Text = &content
	}
	if it.Type == UIItemToolGroup {
		g := it.UIToolGroup
		w.Tool, w.CallID, w.Cmd, w.Stdout, w.Stderr = &g.Tool, &g.CallID, g.Cmd, &g.Stdout, &g.Stderr
		decisions := make([]string, len(g.Approvals))
		for i, a := range g.Approvals {
			decisions[i] = a.Decision
		}
		w.Approvals, w.ApprovalsDetail = &decisions, g.Approvals
		w.ExitCode = &g.ExitCode
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads an item written by MarshalJSON.
func (it *UIItem) UnmarshalJSON(b []byte) error {
	var w uiItemWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*it = UIItem(w.uiItemFields)
	switch {
	case w.MD != nil:
		it.Content = *w.MD
	case w.Text != nil:
		it.Content = *w.Text
	}
	if it.Type == UIItemToolGroup {
		g := &it.UIToolGroup
		g.Tool, g.CallID, g.Cmd = deref(w.Tool), deref(w.CallID), w.Cmd
		g.Stdout, g.Stderr = deref(w.Stdout), deref(w.Stderr)
		g.Approvals = approvalsOf(w.Approvals, w.ApprovalsDetail)
		if w.ExitCode != nil {
			g.ExitCode = *w.ExitCode
		}
	}
	return nil
}

// approvalsOf reads a ToolGroup's decisions: the details where they
// match the decisions one to one, the decisions alone otherwise (a
// producer that follows only the specification); nil for none.
func approvalsOf(decisions *[]string, detail []UIApproval) []UIApproval {
	if decisions == nil || len(*decisions) == 0 {
		return nil
	}
	if len(detail) == len(*decisions) {
		return detail
	}
	out := make([]UIApproval, len(*decisions))
	for i, d := range *decisions {
		out[i] = UIApproval{Decision: d}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Updated wraps s in the ui_state_updated envelope: the whole state after
// a change.
func Updated(s UIState) UISnapshot {
	u := Snapshot(s)
	u.Type = UIUpdateType
	return u
}

// questionClosed marks a question withdrawn unanswered: a UI shows it
// closed, without buttons.
func (r *uiReducer) questionClosed(e core.Event) {
	if e.QuestionID == "" {
		return
	}
	p, ok := r.find("q:" + e.QuestionID)
	if !ok || r.s.Items[p].Type != UIItemQuestion || r.s.Items[p].Answer != nil {
		return
	}
	it := r.s.Items[p]
	why := e.Text
	if why == "" {
		why = core.QuestionExpired
	}
	if it.Closed == why {
		return
	}
	it.Closed, it.Updated = why, e.Time
	r.set(p, it)
}

// uiIDPrefix starts the positional id of an item without an id of its
// own; these ids predate the kind names and stay as they were.
func uiIDPrefix(k UIItemType) string {
	switch k {
	case UIItemNotice:
		return "notice"
	case UIItemTools:
		return "tools"
	case UIItemUser:
		return "user"
	case UIItemAssistant:
		return "assistant"
	case UIItemQuestion:
		return "question"
	}
	return string(k)
}
