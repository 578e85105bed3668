package core

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"unicode/utf8"
)

// Tool activity reported by the agent's runtime (ui.tool_call,
// ui.tool_output, ui.request_approval), and people's decisions on
// approvals.
//
// Decisions, where the architecture is silent:
//   - A tool call is known by its call id within a session; reporting the
//     same call again, or its output again, changes nothing (idempotent).
//     A call reported again while it runs with another command (its
//     runtime learnt more of it: ACP's tool_call_update gives the command
//     after the call began) shows that command from then on: one more
//     EventToolCall, with the new Cmd, which the UIState's ToolGroup and
//     the progress line take. Once its output is in, a call is as it was.
//     The session keeps the newest MaxSessionTools calls (ToolState, without
//     their output), which is what idempotency and "unknown call id" are
//     decided on; the output itself lives only in the event log, like every
//     other UIState item.
//   - Output is bounded: stdout and stderr each keep their last
//     MaxToolOutput bytes (the end of a command's output is what explains
//     how it ended), behind a line saying how much was cut.
//   - An approval is a question (ui.ask's machinery: buttons, options,
//     allow-list) whose answer also records a decision on the call. Only
//     its options answer it — the three decisions, and a fourth, "always
//     allow" (DecisionApproveAlways), where the agent offered to remember
//     an approval for calls like it (ToolCall.CanAlways) — and only by a deliberate choice naming
//     the question (Question.Call): a button, the page's choice, an answer
//     with its question id (a Matrix reply or reaction to it). A number
//     typed in the chat is a message to the agent, never a decision.
//     One nobody answered in time is withdrawn like any question (Withdraw):
//     the call stays undecided and a late click decides nothing.
//   - A call parley approved without asking people (an agent's prompt
//     under permissions = "allow", a call of parley's own tools) is
//     recorded as DecisionApprove with the actor "parley" and the ground
//     (ToolCallStart with Decision and Actor, from parley's own
//     orchestrator only). It is a record, not people's decision: it keeps
//     no digest, so it decides no question about the call.
//   - A decision belongs to the call it was given for: the session, the
//     call id and the call's Digest (tool, command and input as asked).
//     Asked again with the same digest, the decision stands (a retry);
//     with a different one, people are asked again and their answer is the
//     call's decision from then on. A decision recorded before digests
//     were kept has none, so any request for its call asks again.

// Event kinds of tool activity. Each carries Call and the session's Turn.
const (
	EventToolCall     EventKind = "tool_call"     // a tool call started (Call: call id, tool, command)
	EventToolOutput   EventKind = "tool_output"   // it ended (Call: output, exit code)
	EventToolApproval EventKind = "tool_approval" // a person decided on its approval (Call.Decision, Call.Actor)
)

// Command kinds of tool activity. Each carries Call.
const (
	// ToolCallStart records a tool call starting (ui.tool_call).
	ToolCallStart CommandKind = "tool_call"
	// ToolCallOutput records its result (ui.tool_output); the call must be
	// known.
	ToolCallOutput CommandKind = "tool_output"
	// RequestApproval asks the session's people to approve a tool call
	// (ui.request_approval): a question whose id is QuestionID and whose
	// answer records a decision. Text is the agent's reason, if any.
	RequestApproval CommandKind = "request_approval"
)

// KindProgress is the compact progress message of a turn's tool calls,
// edited as they end and deleted when the turn completes.
const KindProgress MessageKind = "progress"

// The approval decisions on a tool call: Call.Decision of
// EventToolApproval, and a ToolGroup's approvals in the UIState's wire
// format (core/uistate).
const (
	DecisionApprove      = "approve"
	DecisionDenyContinue = "deny_continue"
	DecisionDenyAbort    = "deny_abort"
	// DecisionApproveAlways approves the call and asks the agent to allow
	// calls like it from now on; offered only where the agent can
	// (ToolCall.CanAlways).
	DecisionApproveAlways = "approve_always"
)

// Decisions are the decisions an approval question offers, in the order
// its options are shown (core/delivery.ApprovalOptions), and where the
// agent can remember an approval, DecisionApproveAlways after them.
var Decisions = []string{DecisionApprove, DecisionDenyContinue, DecisionDenyAbort, DecisionApproveAlways}

// Bounds of tool activity.
const (
	// MaxToolOutput is how many bytes of each of stdout and stderr a tool
	// call keeps: the last ones.
	MaxToolOutput = 16 << 10
	// MaxToolCmd bounds the command shown for a call.
	MaxToolCmd = 4 << 10
	// MaxToolName bounds a tool's name and a call id.
	MaxToolName = 128
	// MaxSessionTools is how many calls a session remembers.
	MaxSessionTools = 128
	// maxStateCmd bounds the command a session remembers of a call: enough
	// for the progress line, which shows a short first line; the whole
	// command is in the call's event.
	maxStateCmd = 400
)

// ToolCall is what a tool command or event says about one call. Fields a
// kind does not use are empty.
type ToolCall struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool,omitempty"`
	Cmd    string `json:"cmd,omitempty"`
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// ExitCode is nil when the runtime gave none.
	ExitCode *int `json:"exit_code,omitempty"`
	// Decision and Actor belong to EventToolApproval.
	Decision string `json:"decision,omitempty"`
	Actor    Actor  `json:"actor,omitzero"`
	// Input is the call's structured arguments (JSON), when the runtime
	// gave them with RequestApproval: part of its Digest, never shown or
	// stored in events.
	Input json.RawMessage `json:"-"`
	// CanAlways, with RequestApproval, says the agent offers to remember
	// an approval for calls like this one: people get a fourth option,
	// "always allow". Not stored in events.
	CanAlways bool `json:"-"`
}

// Digest is what a decision on call c is bound to: SHA-256, in unpadded
// base64url, over its tool, its command as shown to people and its Input
// as canonical JSON (object keys sorted, no insignificant space, numbers
// as written). Two requests with the same call id and digest ask about
// the same call.
func (c ToolCall) Digest() string {
	fields, _ := json.Marshal([]string{c.Tool, c.Cmd, canonicalJSON(c.Input)})
	sum := sha256.Sum256(fields)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// canonicalJSON is raw re-encoded canonically (encoding/json writes object
// keys sorted), or raw as it is when it is no JSON; "" when empty or null.
func canonicalJSON(raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil || dec.More() {
		return string(raw)
	}
	if v == nil {
		return ""
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(out)
}

// ToolState is what a session remembers of one tool call: small, as the
// session is read for every event it has.
type ToolState struct {
	CallID string `json:"call_id"`
	Tool   string `json:"tool"`
	Cmd    string `json:"cmd,omitempty"`
	// Turn is the turn the call started in.
	Turn uint64 `json:"turn"`
	// Done is set once its output was reported.
	Done     bool `json:"done,omitempty"`
	ExitCode *int `json:"exit_code,omitempty"`
	// Question is the open approval question, Decision the decision made
	// and Digest the ToolCall.Digest of the call as it was decided.
	Question string `json:"question,omitempty"`
	Decision string `json:"decision,omitempty"`
	Digest   string `json:"digest,omitempty"`
}

// DecidedFor returns the decision made on the call t remembers when it
// was made for the call as digest shows it, else "".
func (t ToolState) DecidedFor(digest string) string {
	if t.Digest != digest {
		return ""
	}
	return t.Decision
}

// Failed reports whether the call ended with a non-zero exit code.
func (t ToolState) Failed() bool { return t.ExitCode != nil && *t.ExitCode != 0 }

// FindTool returns the position of call id in tools, or -1.
func FindTool(tools []ToolState, id string) int {
	for i := len(tools) - 1; i >= 0; i-- {
		if tools[i].CallID == id {
			return i
		}
	}
	return -1
}

// StateCmd is cmd as a ToolState keeps it: its first bytes, cut at a
// character boundary.
func StateCmd(cmd string) string {
	if len(cmd) <= maxStateCmd {
		return cmd
	}
	end := maxStateCmd
	for end > 0 && !utf8.RuneStart(cmd[end]) {
		end--
	}
	return cmd[:end]
}
