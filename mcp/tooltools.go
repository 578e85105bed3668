package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Tool activity from the agent's runtime: ui.tool_call and ui.tool_output
// report a call and its result (idempotent by call_id, but for a running
// call reported with another cmd, which then shows it; see core/tools.go),
// ui.request_approval asks the session's people to decide on a call. An
// approval is a question asked through ui.ask's machinery — the waiter is
// registered before the question exists, the answer arrives on the bus —
// whose answer the Service also records as the call's decision. A timeout
// withdraws the question (a late click decides nothing) and returns
// {"decision": "timeout"}: never an approval. Like ui.ask's, a question
// that ends unanswered (timeout, the call cancelled, the person's /cancel)
// is withdrawn on every platform (withdraw.go). A decision belongs to the
// call as it was asked about (core.ToolCall.Digest: tool, cmd and input):
// asked again the same, the decision stands; asked with the same call_id
// about anything else, people are asked again. Nothing an MCP client posts
// decides an approval (chat.human.post is a message): the agent's side of
// parley never approves its own calls. The one exception is a record, not
// a decision: parley's own orchestrator (the own client, OwnClientHeader)
// reports a call it allowed without asking people (an agent's prompt under
// permissions = "allow", a call of parley's own tools) with ui.tool_call's
// approved_by, which records the call's approval with the actor parley
// and that ground; any other client is refused.

// DecisionTimeout is ui.request_approval's result when nobody decided in
// time.
const DecisionTimeout = "timeout"

func (s *Server) addToolActivityTools() {
	sessionArg := mcp.WithString("session_id", mcp.Description("The session; defaults to the session this connection is bound to."))
	callArg := mcp.WithString("call_id", mcp.Required(), mcp.Description(fmt.Sprintf("The call's id, unique in the session (at most %d bytes); reports with the same id are one call.", core.MaxToolName)))
	toolArg := mcp.WithString("tool", mcp.Required(), mcp.Description("The tool's name (shell, edit_file, …)."))
	cmdArg := mcp.WithString("cmd", mcp.Description("The command or arguments as people should see them."))
	s.addTool("ui.tool_call", "Report a tool call starting, shown to the session's people (a progress line while the turn runs, a tool group on the page). "+
		"Idempotent by call_id; reported again with another cmd while it runs, the call shows that cmd.", s.toolCall,
		callArg, toolArg, cmdArg, sessionArg,
		mcp.WithString("approved_by", mcp.Description("parley's own orchestrator only: the call was approved without asking people, "+
			"on the ground this names (permissions = \"allow\"); recorded as the call's approval by \"parley (GROUND)\". Refused from any other client.")),
		mcp.WithIdempotentHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("ui.tool_output", fmt.Sprintf("Report a tool call's result (after ui.tool_call with the same call_id). stdout and stderr keep their last %d KiB each; "+
		"a non-zero exit_code is shown as an error. Idempotent by call_id: the first result is kept.", core.MaxToolOutput>>10), s.toolOutput,
		callArg,
		mcp.WithString("stdout", mcp.Description("The call's standard output (or its result).")),
		mcp.WithString("stderr", mcp.Description("The call's standard error.")),
		mcp.WithNumber("exit_code", mcp.Description("The exit code; non-zero is an error.")),
		sessionArg, mcp.WithIdempotentHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false),
	)
	s.addTool("ui.request_approval", "Ask the session's people to approve a tool call (buttons where the platform has them, numbered options where not) "+
		`and wait for their decision: {"decision": "approve" | "deny_continue" | "deny_abort"}, "approve_always" where always was offered, `+
		`or "timeout" when nobody decided in time (never an approval).`,
		s.requestApproval,
		callArg, toolArg, cmdArg,
		mcp.WithObject("input", mcp.Description("The call's arguments as structured data, if it has them. "+
			"The decision is bound to tool, cmd and input: the same call_id asked about anything else is asked again.")),
		mcp.WithString("reason", mcp.Description("Why the call needs approval, shown with it.")),
		mcp.WithBoolean("always", mcp.Description("Offer a fourth choice, Always allow (decision approve_always): the runtime can remember an approval for calls like this one.")),
		mcp.WithNumber("timeout_s", mcp.Description("Seconds to wait for a decision (default 300, at most 3600).")),
		sessionArg, mcp.WithDestructiveHintAnnotation(false),
	)
}

type toolCallArgs struct {
	CallID     string `json:"call_id"`
	Tool       string `json:"tool"`
	Cmd        string `json:"cmd"`
	ApprovedBy string `json:"approved_by"`
	SessionID  string `json:"session_id"`
}

// approverID is the Actor.ID of a call parley approved without asking
// people (ui.tool_call's approved_by names the ground).
const approverID = "parley"

type toolOutputArgs struct {
	CallID    string   `json:"call_id"`
	Stdout    string   `json:"stdout"`
	Stderr    string   `json:"stderr"`
	ExitCode  *float64 `json:"exit_code"`
	SessionID string   `json:"session_id"`
}

type approvalArgs struct {
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Cmd       string          `json:"cmd"`
	Input     json.RawMessage `json:"input"`
	Reason    string          `json:"reason"`
	Always    bool            `json:"always"`
	TimeoutS  *float64        `json:"timeout_s"`
	SessionID string          `json:"session_id"`
}

// toolResult is the answer of ui.tool_call and ui.tool_output. Duplicate
// says the call (or its output) was reported before and nothing changed.
type toolResult struct {
	OK        bool           `json:"ok"`
	CallID    string         `json:"call_id"`
	Duplicate bool           `json:"duplicate,omitempty"`
	SessionID core.SessionID `json:"session_id"`
}

type approvalResult struct {
	Decision  string         `json:"decision"`
	CallID    string         `json:"call_id"`
	SessionID core.SessionID `json:"session_id"`
}

func (s *Server) toolCall(ctx context.Context, raw json.RawMessage) (any, error) {
	var a toolCallArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	call := &core.ToolCall{CallID: a.CallID, Tool: a.Tool, Cmd: a.Cmd}
	if a.ApprovedBy != "" {
		// Only the daemon's own orchestrator, which answered the agent
		// itself, may say a call was approved: no other client records
		// a decision (and this one decides nothing for later questions).
		if !ownFrom(ctx) {
			return nil, toolError("approved_by is for parley's own orchestrator only")
		}
		if len(a.ApprovedBy) > core.MaxToolName || !utf8.ValidString(a.ApprovedBy) {
			return nil, toolError(fmt.Sprintf("approved_by is not valid UTF-8 of at most %d bytes", core.MaxToolName))
		}
		call.Decision, call.Actor = core.DecisionApprove, core.Actor{ID: approverID, Name: approverID + " (" + a.ApprovedBy + ")"}
	}
	id, err := s.sessionFor(ctx, "ui.tool_call", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	res, err := s.handle(ctx, core.Command{Kind: core.ToolCallStart, Session: id, Origin: core.OriginMCP, Call: call})
	if err != nil {
		return nil, err
	}
	return toolResult{OK: true, CallID: a.CallID, Duplicate: res.Duplicate, SessionID: res.Session}, nil
}

func (s *Server) toolOutput(ctx context.Context, raw json.RawMessage) (any, error) {
	var a toolOutputArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	call := &core.ToolCall{CallID: a.CallID, Stdout: a.Stdout, Stderr: a.Stderr}
	if a.ExitCode != nil {
		code := int(*a.ExitCode)
		if float64(code) != *a.ExitCode {
			return nil, toolError(fmt.Sprintf("exit_code %g is not a whole number", *a.ExitCode))
		}
		call.ExitCode = &code
	}
	id, err := s.sessionFor(ctx, "ui.tool_output", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	res, err := s.handle(ctx, core.Command{Kind: core.ToolCallOutput, Session: id, Origin: core.OriginMCP, Call: call})
	if err != nil {
		return nil, err
	}
	return toolResult{OK: true, CallID: a.CallID, Duplicate: res.Duplicate, SessionID: res.Session}, nil
}

func (s *Server) requestApproval(ctx context.Context, raw json.RawMessage) (any, error) {
	var a approvalArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.CallID) == "" {
		return nil, toolError("call_id is empty")
	}
	if in := bytes.TrimSpace(a.Input); len(in) > 0 && string(in) != "null" && in[0] != '{' {
		return nil, toolError("input is not an object: give the call's arguments as a JSON object, or leave it out")
	}
	call := &core.ToolCall{CallID: a.CallID, Tool: a.Tool, Cmd: a.Cmd, Input: a.Input, CanAlways: a.Always}
	timeout, err := askTimeout(a.TimeoutS)
	if err != nil {
		return nil, err
	}
	id, err := s.sessionFor(ctx, "ui.request_approval", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	result := func(decision string) approvalResult {
		return approvalResult{Decision: decision, CallID: a.CallID, SessionID: id}
	}
	// Asked again (a retry) after the people decided on this very call:
	// the decision stands.
	if d, err := s.decided(ctx, id, call); err != nil || d != "" {
		return result(d), err
	}
	qid := newQuestionID()
	outcome, done := s.asks.wait(qid, id)
	defer done()
	if _, err := s.handle(ctx, core.Command{Kind: core.RequestApproval, Session: id, Origin: core.OriginMCP,
		Call: call, Text: a.Reason, QuestionID: qid}); err != nil {
		return nil, err
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	answered := func(o askOutcome) (any, error) {
		if o.err != nil {
			return nil, toolError(o.err.Error())
		}
		d, ok := delivery.DecisionOf(delivery.ApprovalOptionsFor(a.Always), o.msg.Content)
		if !ok {
			return nil, fmt.Errorf("the answer %q is no decision", o.msg.Content)
		}
		return result(d), nil
	}
	select {
	case o := <-outcome:
		if errors.Is(o.err, errAskCancelled) {
			s.withdrawAsk(ctx, id, qid, core.QuestionCancelled, nil)
		}
		return answered(o)
	case <-timer.C:
		if o, ok := s.withdrawAsk(ctx, id, qid, core.QuestionExpired, outcome); ok {
			return answered(o)
		}
		return result(DecisionTimeout), nil
	case <-ctx.Done():
		if o, ok := s.withdrawAsk(ctx, id, qid, core.QuestionCancelled, outcome); ok {
			return answered(o)
		}
		return nil, fmt.Errorf("waiting for the decision: %w", ctx.Err())
	}
}

// decided returns the decision people made on call in session, if they
// made one for the call as it is asked about now (its digest).
func (s *Server) decided(ctx context.Context, session core.SessionID, call *core.ToolCall) (string, error) {
	sess, err := s.opts.Store.Session(ctx, session)
	if err != nil {
		return "", fmt.Errorf("reading the session: %w", err)
	}
	if i := core.FindTool(sess.Tools, call.CallID); i >= 0 {
		return sess.Tools[i].DecidedFor(call.Digest()), nil
	}
	return "", nil
}
