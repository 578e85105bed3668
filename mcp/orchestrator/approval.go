package orchestrator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
)

// What the model reads when a call is not run.
const (
	deniedContinue = "The person denied this call; do not retry it. Continue without it, or ask them what to do instead."
	deniedAbort    = "The person denied this call and stopped the turn."
	deniedTimeout  = "Nobody approved this call in time, so it was not run; do not retry it. Say what you needed it for and end your turn."
	deniedNoAsk    = "parley is configured not to relay permission prompts; the call was not run."
	deniedFailed   = "The approval could not be asked; the call was not run."
)

// allowedByConfig is the ground of a call allowed under AllowPermissions,
// as people read it: "approved by parley (permissions = "allow")".
const allowedByConfig = `permissions = "allow"`

// allowed records in call id's ToolGroup that it was approved without
// asking people, on ground by (ui.tool_call's approved_by, which only
// parley's own client may give): the call as shown, with the command
// asked about.
func (w *worker) allowed(ctx context.Context, id, tool, cmd, by string) {
	if tool == "" {
		tool = "tool"
	}
	if c, ok := w.turn.calls[id]; ok {
		tool = c.tool
		if cmd == "" {
			cmd = c.cmd
		}
	}
	w.turn.calls[id] = shownCall{tool: tool, cmd: cmd}
	w.post(ctx, "ui.tool_call", map[string]any{"call_id": id, "tool": tool, "cmd": cmd, "approved_by": by})
}

// decision is the outcome of one ui.request_approval.
type decision struct {
	requestID string
	decision  string
	err       error
}

// ask puts a permission request to the session's people with
// ui.request_approval, in its own goroutine (it waits for them); the
// worker answers the agent when the decision arrives.
func (w *worker) ask(ctx context.Context, pr agent.PermissionRequest) {
	t := w.turn
	callID := pr.ToolUseID
	if callID == "" {
		callID = "permission-" + pr.RequestID
	}
	if w.agent != nil && !w.agent.AskPermissions && w.agent.AllowPermissions && !t.interrupted {
		// Recorded before the agent is answered: a call that runs is
		// never one the ToolGroup does not say was allowed.
		w.allowed(ctx, callID, pr.ToolName, pr.Show, allowedByConfig)
		w.answer(pr.RequestID, agent.Decision{Allow: true})
		return
	}
	if w.agent == nil || !w.agent.AskPermissions || t.interrupted {
		w.answer(pr.RequestID, agent.Decision{Message: deniedNoAsk})
		return
	}
	actx, cancel := context.WithCancel(ctx)
	t.approvals[pr.RequestID] = cancel
	args := map[string]any{"call_id": callID, "tool": pr.ToolName, "cmd": pr.Show,
		"reason": pr.Description, "timeout_s": w.o.opts.ApprovalTimeout.Seconds(), "session_id": w.id}
	if in := approvalInput(pr.Input); in != nil {
		args["input"] = in
	}
	if pr.CanAlways {
		args["always"] = true
	}
	go func() {
		var res struct {
			Decision string `json:"decision"`
		}
		err := w.o.call(actx, "ui.request_approval", args, &res)
		select {
		case w.decided <- decision{requestID: pr.RequestID, decision: res.Decision, err: err}:
		case <-ctx.Done():
		}
	}()
}

// maxApprovalInput bounds the input sent whole with an approval: /mcp
// takes at most 4 MiB a request, and a Write can carry more.
const maxApprovalInput = 1 << 20

// approvalInput is what the decision on a call is bound to besides its
// tool and the command people read (which for Write or Edit is only the
// file): its whole input, or for an input past maxApprovalInput the
// input's SHA-256, which binds it as firmly. nil when the input is no
// JSON object; the decision is then bound to tool and command alone.
func approvalInput(input json.RawMessage) json.RawMessage {
	in := bytes.TrimSpace(input)
	if len(in) == 0 || in[0] != '{' || !json.Valid(in) {
		return nil
	}
	if len(in) <= maxApprovalInput {
		return in
	}
	sum := sha256.Sum256(in)
	return json.RawMessage(`{"sha256":"` + hex.EncodeToString(sum[:]) + `"}`)
}

// onDecision answers the agent: approve allows; approve_always (offered
// where the agent can remember it) allows and asks the agent to allow
// calls like it from now on; deny_continue denies with a
// message the model reads; deny_abort denies and ends the turn; a timeout
// (the question withdrawn by ui.request_approval) denies; a failure denies
// and ends the turn. Never an approval but the people's.
func (w *worker) onDecision(ctx context.Context, d decision) {
	t := w.turn
	if t == nil {
		return
	}
	if _, ok := t.approvals[d.requestID]; ok && d.err != nil {
		// parley ends a waiting approval when the person cancels or
		// closes; the /cancel or /close is in the inbox already, and
		// says what to do with the turn.
		if err := w.readInbox(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("reading the session's inbox failed", "err", err)
		}
		if t = w.turn; t == nil {
			return
		}
	}
	cancel, ok := t.approvals[d.requestID]
	if !ok {
		return // the turn was interrupted and the request answered then
	}
	cancel()
	delete(t.approvals, d.requestID)
	var dec agent.Decision
	switch {
	case d.err != nil:
		w.log.Warn("asking for an approval failed; denying the call", "err", d.err)
		dec = agent.Decision{Message: deniedFailed, Interrupt: true}
	case d.decision == core.DecisionApprove:
		dec = agent.Decision{Allow: true}
	case d.decision == core.DecisionApproveAlways:
		dec = agent.Decision{Allow: true, Always: true}
	case d.decision == core.DecisionDenyContinue:
		dec = agent.Decision{Message: deniedContinue}
		t.deniedGoOn, t.atDenial = true, t.answer()
	case d.decision == core.DecisionDenyAbort:
		dec = agent.Decision{Message: deniedAbort, Interrupt: true}
		t.deniedAbort = true
	default: // "timeout", or anything unknown
		dec = agent.Decision{Message: deniedTimeout}
	}
	w.answer(d.requestID, dec)
	if dec.Interrupt {
		t.interrupted = true
		t.grace.set(interruptGrace)
	}
	w.armDeadline()
}

func (w *worker) answer(requestID string, d agent.Decision) {
	if w.proc == nil {
		return
	}
	if err := w.proc.Answer(requestID, d); err != nil {
		w.log.Debug("answering a permission request failed", "request", requestID, "err", fmt.Errorf("orchestrator: %w", err))
	}
}
