package commands

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Tool activity (core/tools.go): the session remembers its newest calls,
// which makes reports idempotent by call id; each new fact is one logged
// event, which the UiState reduces into a ToolGroup and the dispatcher
// shows in the turn's progress message.

// checkCall validates the call of a tool command.
func checkCall(c *core.ToolCall, needTool bool) error {
	if c == nil || strings.TrimSpace(c.CallID) == "" {
		return invalid("call_id is empty")
	}
	if len(c.CallID) > core.MaxToolName {
		return invalid("call_id is longer than %d bytes", core.MaxToolName)
	}
	if needTool && strings.TrimSpace(c.Tool) == "" {
		return invalid("tool is empty")
	}
	if len(c.Tool) > core.MaxToolName {
		return invalid("tool is longer than %d bytes", core.MaxToolName)
	}
	if len(c.Cmd) > core.MaxToolCmd {
		return invalid("cmd is longer than %d bytes", core.MaxToolCmd)
	}
	for _, s := range []string{c.CallID, c.Tool, c.Cmd, c.Stdout, c.Stderr} {
		if !utf8.ValidString(s) {
			return invalid("the tool call's text is not valid UTF-8")
		}
	}
	return nil
}

// noteCall adds a call to the session's memory, forgetting the oldest past
// core.MaxSessionTools.
func noteCall(ss *core.Session, t core.ToolState) {
	tools := ownTools(ss)
	if n := len(tools) + 1 - core.MaxSessionTools; n > 0 {
		tools = tools[n:]
	}
	ss.Tools = append(tools, t)
}

// ownTools gives ss a copy of its calls to change in place: the session a
// store hands to an update function may share them with its other readers.
func ownTools(ss *core.Session) []core.ToolState {
	ss.Tools = slices.Clone(ss.Tools)
	return ss.Tools
}

// toolUpdate runs fn on a scratch copy of the session, under its lock, and
// stores the events it returns with the copy's calls and status; fn returns
// none when the command changes nothing (a repeated report), and the result
// is then a duplicate.
func (s *Service) toolUpdate(ctx context.Context, cmd core.Command, fn func(ss *core.Session) ([]core.Event, error)) (core.Result, error) {
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		cp := scratch(sess)
		events, err := fn(&cp)
		if err != nil {
			return change{}, err
		}
		return change{op: string(cmd.Kind), events: events, update: func(ss *core.Session) {
			ss.Tools, ss.Status = cp.Tools, cp.Status
		}}, nil
	})
}

// toolCall records a tool call starting; the agent is then working. A
// running call reported again with another command shows that command. A
// report with a decision (Call.Decision approve and Call.Actor: only
// parley's own orchestrator reports one, for a call allowed without
// asking people) also records it, once, as the call's approval; it
// decides nothing else: no digest is kept, so a question about the call
// would still be asked.
func (s *Service) toolCall(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := checkCall(cmd.Call, true); err != nil {
		return core.Result{}, err
	}
	if d := cmd.Call.Decision; d != "" && (d != core.DecisionApprove || cmd.Call.Actor.ID == "") {
		return core.Result{}, invalid("a tool call reported as decided must be approved, by someone")
	}
	return s.toolUpdate(ctx, cmd, func(ss *core.Session) ([]core.Event, error) {
		var events []core.Event
		i := core.FindTool(ss.Tools, cmd.Call.CallID)
		if i < 0 {
			events = startCall(ss, cmd)
			i = len(ss.Tools) - 1
		} else if t := &ownTools(ss)[i]; !t.Done && cmd.Call.Cmd != "" && core.StateCmd(cmd.Call.Cmd) != t.Cmd {
			// The runtime tells more of a running call: it shows the
			// new command.
			t.Cmd = core.StateCmd(cmd.Call.Cmd)
			call := core.ToolCall{CallID: t.CallID, Tool: t.Tool, Cmd: cmd.Call.Cmd}
			events = append(events, core.Event{Kind: core.EventToolCall, Session: ss.ID, Origin: cmd.Origin, Turn: ss.Turn, Call: &call})
		}
		if t := &ownTools(ss)[i]; cmd.Call.Decision != "" && t.Decision == "" {
			t.Decision = cmd.Call.Decision
			call := core.ToolCall{CallID: t.CallID, Tool: t.Tool, Decision: cmd.Call.Decision, Actor: cmd.Call.Actor}
			events = append(events, core.Event{Kind: core.EventToolApproval, Session: ss.ID, Origin: cmd.Origin, Turn: ss.Turn, Call: &call})
		}
		return events, nil
	})
}

// startCall adds cmd's call to ss and returns its events.
func startCall(ss *core.Session, cmd core.Command) []core.Event {
	c := *cmd.Call
	noteCall(ss, core.ToolState{CallID: c.CallID, Tool: c.Tool, Cmd: core.StateCmd(c.Cmd), Turn: ss.Turn})
	call := core.ToolCall{CallID: c.CallID, Tool: c.Tool, Cmd: c.Cmd}
	events := []core.Event{{Kind: core.EventToolCall, Session: ss.ID, Origin: cmd.Origin, Turn: ss.Turn, Call: &call}}
	if ss.Status == core.StatusIdle {
		events = append(events, statusEvent(*ss, core.StatusWorking, cmd.Origin))
		ss.Status = core.StatusWorking
	}
	return events
}

// toolOutput records a call's result, bounded (core.MaxToolOutput). The
// call must be known; its first output is the one kept.
func (s *Service) toolOutput(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := checkCall(cmd.Call, false); err != nil {
		return core.Result{}, err
	}
	return s.toolUpdate(ctx, cmd, func(ss *core.Session) ([]core.Event, error) {
		i := core.FindTool(ss.Tools, cmd.Call.CallID)
		if i < 0 {
			return nil, refusal(core.ErrInvalid, fmt.Sprintf("unknown call_id %q: report the call with ui.tool_call first", cmd.Call.CallID),
				"call "+cmd.Call.CallID)
		}
		t := &ss.Tools[i]
		if t.Done {
			return nil, nil
		}
		t.Done = true
		call := core.ToolCall{CallID: t.CallID, Tool: t.Tool,
			Stdout: tailKeep(cmd.Call.Stdout, core.MaxToolOutput), Stderr: tailKeep(cmd.Call.Stderr, core.MaxToolOutput)}
		if cmd.Call.ExitCode != nil {
			code := *cmd.Call.ExitCode
			t.ExitCode, call.ExitCode = &code, &code
		}
		return []core.Event{{Kind: core.EventToolOutput, Session: ss.ID, Origin: cmd.Origin, Turn: ss.Turn, Call: &call}}, nil
	})
}

// approvalText is the question an approval request shows.
func approvalText(c core.ToolCall, reason string) string {
	var b strings.Builder
	b.WriteString("🔐 **Approve this tool call?**\n\n**" + c.Tool + "**")
	if c.Cmd != "" {
		fence := "```"
		for strings.Contains(c.Cmd, fence) {
			fence += "`"
		}
		b.WriteString("\n" + fence + "\n" + c.Cmd + "\n" + fence)
	}
	if r := strings.TrimSpace(reason); r != "" {
		b.WriteString("\n\n" + r)
	}
	return b.String()
}

// requestApproval asks the session's people to decide on a tool call: a
// question with delivery.ApprovalOptionsFor the call (the fourth, "Always
// allow", where the agent offers it), whose answer records the decision
// for the call as the question shows it (its digest). An unknown call is
// recorded as starting first; a call decided as shown is refused (the
// decision stands: ui.request_approval returns it without asking), one
// decided as shown differently is asked about again.
func (s *Service) requestApproval(ctx context.Context, cmd core.Command) (core.Result, error) {
	if err := checkCall(cmd.Call, true); err != nil {
		return core.Result{}, err
	}
	if cmd.QuestionID == "" || len(cmd.QuestionID) > 32 {
		return core.Result{}, invalid("an approval needs a question id of 1 to 32 bytes")
	}
	text := approvalText(*cmd.Call, cmd.Text)
	if err := s.checkContent(text, nil); err != nil {
		return core.Result{}, err
	}
	digest := cmd.Call.Digest()
	return s.inSession(ctx, cmd, func(sess core.Session) (change, error) {
		if i := core.FindTool(sess.Tools, cmd.Call.CallID); i >= 0 && sess.Tools[i].DecidedFor(digest) != "" {
			return change{}, refusal(core.ErrInvalid,
				fmt.Sprintf("call %s was decided already: %s", cmd.Call.CallID, sess.Tools[i].Decision), "call "+cmd.Call.CallID)
		}
		qid := cmd.QuestionID
		q := core.Question{ID: qid, Text: text, Options: delivery.ApprovalOptionsFor(cmd.Call.CanAlways), Asked: s.opts.Now(),
			Call: cmd.Call.CallID, Digest: digest}
		msg := core.Message{Session: sess.ID, Role: core.RoleAssistant, Origin: cmd.Origin, Mime: core.MimeQuestion, Content: text}
		// The events are decided on a copy, as Update applies the same
		// changes to the session the store holds.
		apply := func(ss *core.Session) []core.Event {
			var events []core.Event
			i := core.FindTool(ss.Tools, cmd.Call.CallID)
			if i < 0 {
				events = startCall(ss, cmd)
				i = len(ss.Tools) - 1
			}
			// The progress line shows the call as it is asked about now.
			t := &ownTools(ss)[i]
			t.Question, t.Tool, t.Cmd = qid, cmd.Call.Tool, core.StateCmd(cmd.Call.Cmd)
			events = append(events, core.Event{Kind: core.EventQuestion, Session: ss.ID, Origin: cmd.Origin, Message: &msg, QuestionID: qid, Options: q.Options})
			if ss.Status != core.StatusWaiting {
				events = append(events, statusEvent(*ss, core.StatusWaiting, cmd.Origin))
			}
			ss.Questions = append(removeQuestion(ss.Questions, qid), q)
			ss.Status = core.StatusWaiting
			return events
		}
		cp := scratch(sess)
		return change{op: "request approval", msg: &msg, events: apply(&cp), update: func(ss *core.Session) { apply(ss) }}, nil
	})
}

// approvalCall returns the id of the tool call question q decides, and
// whether q is an approval at all: its Call, or, for an approval asked
// before questions named their call, the call waiting on it.
func approvalCall(sess core.Session, q core.Question) (string, bool) {
	if q.Call != "" {
		return q.Call, true
	}
	if i := questionTool(sess.Tools, q.ID); i >= 0 {
		return sess.Tools[i].CallID, true
	}
	return "", false
}

// approvalAnswer is what answering question q means for a tool call
// waiting on it: the decision's event and the change to the session
// (nothing when q is no approval); err refuses an answer that is no
// decision. The decision is recorded with the digest of the call as q
// showed it.
func approvalAnswer(sess core.Session, q core.Question, text string, cmd core.Command) (events []core.Event, update func(*core.Session), err error) {
	callID, ok := approvalCall(sess, q)
	if !ok {
		return nil, func(*core.Session) {}, nil
	}
	decision, ok := delivery.DecisionOf(q.Options, text)
	if !ok {
		words := "Approve, Deny and continue, or Deny and abort (or 1, 2, 3)"
		if slices.Contains(q.Options, delivery.AlwaysAllow) {
			words = "Approve, Deny and continue, Deny and abort, or Always allow (or 1, 2, 3, 4)"
		}
		return nil, nil, refusal(core.ErrInvalid, "this is an approval: answer "+words,
			fmt.Sprintf("answer %q to approval %s", text, q.ID))
	}
	call := core.ToolCall{CallID: callID, Decision: decision, Actor: cmd.Actor}
	if i := core.FindTool(sess.Tools, callID); i >= 0 {
		call.Tool = sess.Tools[i].Tool
	}
	events = []core.Event{{Kind: core.EventToolApproval, Session: sess.ID, Origin: cmd.Origin, Turn: sess.Turn, Call: &call}}
	return events, func(ss *core.Session) {
		if j := core.FindTool(ss.Tools, callID); j >= 0 {
			t := &ownTools(ss)[j]
			if t.Question == q.ID {
				t.Question = ""
			}
			t.Decision, t.Digest = decision, q.Digest
		}
	}, nil
}

// questionTool returns the position of the call waiting on question qid, or -1.
func questionTool(tools []core.ToolState, qid string) int {
	for i := range tools {
		if tools[i].Question == qid {
			return i
		}
	}
	return -1
}

// forgetApproval notes that question qid, withdrawn unanswered, no longer
// waits for a decision on its call: the call stays undecided.
func forgetApproval(ss *core.Session, qid string) {
	if i := questionTool(ss.Tools, qid); i >= 0 {
		ownTools(ss)[i].Question = ""
	}
}

// tailKeep returns the last max bytes of s (cut at a character boundary)
// behind a line saying how many bytes were cut, or s when it fits: a tool's
// output keeps its end, where the verdict usually is.
func tailKeep(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := len(s) - max
	for cut < len(s) && !utf8.RuneStart(s[cut]) {
		cut++
	}
	return fmt.Sprintf("… [%d bytes cut]\n", cut) + s[cut:]
}
