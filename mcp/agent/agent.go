// Package agent is the one interface between parley's orchestrator and the
// agents it runs. An agent protocol is a driver: Claude Code's stream-json
// (package claudecode) and the Agent Client Protocol (package acp) each
// turn their agent's output into the Events below and take Decisions and
// turns through a Conversation. The orchestrator (package orchestrator) is
// generic around them: it reads people's messages, hands turns to a
// Conversation and shows its Events through parley's MCP tools, the same
// way for every driver. A difference between agents lives in its driver,
// never in the orchestrator.
//
// The Events are the protocols' common ground: streamed text and finished
// text blocks (the answer), thoughts (never shown as the answer), tool
// calls with what people should read of them and their results, plans,
// permission prompts and their withdrawal, calls a driver allowed by
// itself, retries of the model's API, and
// the end of a turn with why it ended. A driver says what people read of a
// tool call (ToolUse.Show): which argument of which tool matters is the
// driver's knowledge, not the orchestrator's.
//
// Conversations are named one of two ways. Claude Code takes a name the
// client chose (--session-id), so the orchestrator can save the name before
// anything starts: such a driver implements Namer. An ACP agent names its
// sessions itself (session/new answers a sessionId): the orchestrator saves
// Conversation.ID once Start returned.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Driver starts conversations of one configured agent.
type Driver interface {
	// Start starts or resumes the conversation StartRequest names. It
	// blocks until the conversation is ready for Send, or fails: with
	// ErrNoConversation when Resume named a conversation the agent does
	// not have, with a *Problem when people can fix the cause.
	Start(ctx context.Context, req StartRequest) (Conversation, error)
}

// Namer is implemented by drivers whose conversations the client names
// (Claude Code's --session-id): the orchestrator asks for a new name, saves
// it, and only then starts the conversation under it.
type Namer interface {
	// NewConversation returns a fresh conversation name.
	NewConversation() string
}

// StartRequest says which conversation to start.
type StartRequest struct {
	// Session is the parley session the conversation serves; drivers key
	// their processes and files by it.
	Session string
	// Conversation is the agent's conversation id: for a Namer the name
	// the orchestrator chose (always set), for other drivers the id the
	// agent gave at an earlier start ("" starts a new conversation).
	Conversation string
	// Resume continues Conversation, which had a turn before: its earlier
	// turns are in the agent's view, and none of them is reported again as
	// Events.
	Resume bool
	// Tools is parley's own MCP server, bound to Session, for the agent to
	// send files, ask questions and set the title with. The zero value
	// hands it none.
	Tools Tools
}

// Tools is how an agent reaches parley's MCP server, bound to one session.
type Tools struct {
	// URL is the Streamable HTTP endpoint, bound to the session.
	URL string
	// Header is sent with every request: the credential that admits this
	// session's agent, and nothing else. Values are secrets: never logged.
	Header map[string]string
	// Stdio is the command line of a stdio MCP server that proxies to
	// URL (parley mcp --session ID), for agents that cannot reach HTTP;
	// its environment carries the credential (StdioEnv).
	Stdio    []string
	StdioEnv []string
}

// Conversation is one running conversation of an agent.
type Conversation interface {
	// ID is the agent's id of this conversation, to be saved and given
	// back in a later StartRequest.
	ID() string
	// Send hands one turn of people's text and returns once the agent
	// has it; the turn's Events follow.
	Send(ctx context.Context, text string) error
	// Events delivers what the agent does, in order. It is closed when
	// the conversation ended (Done). Its consumer reads it until it is
	// closed, after Stop too (the orchestrator drains what is left), so a
	// driver may block on a send to it.
	Events() <-chan Event
	// Answer answers the PermissionRequest with RequestID. It fails when
	// the request is not waiting (answered, withdrawn, or its turn ended).
	Answer(requestID string, d Decision) error
	// Interrupt ends the running turn; its Result follows (StopCancelled).
	Interrupt(ctx context.Context) error
	// Stop ends the conversation here: its process, or its share of a
	// process that serves several. It blocks until that is done.
	Stop() error
	// Done is closed once the conversation ended, for whatever reason.
	Done() <-chan struct{}
	// Err says why the conversation ended (nil after Stop); a *Problem
	// when people can act on it.
	Err() error
}

// ErrNoConversation is Start's error when Resume named a conversation the
// agent has no record of. The caller starts a new one.
var ErrNoConversation = errors.New("agent: the agent has no conversation by that id")

// Problem is a failure people can act on: what went wrong and what fixes
// it, in words for the people of a session (parley posts them as they are).
type Problem struct {
	// Cause says what went wrong: `the agent command "opencode" is not
	// installed (not found on PATH)`.
	Cause string
	// Fix says what to do about it.
	Fix string
	// Err is the underlying error, when there is one.
	Err error
}

func (p *Problem) Error() string {
	s := "agent: " + p.Cause
	if p.Err != nil {
		s += ": " + p.Err.Error()
	}
	return s
}

func (p *Problem) Unwrap() error { return p.Err }

// Event is one thing a conversation reported. The concrete types below are
// all there is.
type Event interface{ isEvent() }

// Init starts a turn, where the protocol says so (Claude Code does; an
// ACP driver need not send it).
type Init struct {
	Conversation string
	Model        string
}

// TextDelta is a piece of streamed answer text, in order. Block counts the
// text blocks of the turn from 0, so a consumer can tell where one ends.
type TextDelta struct {
	Block int
	Text  string
}

// Text is a finished text block: the whole block, which the TextDeltas of
// the same Block add up to. A driver whose agent only streams (ACP) sends
// it when the block ends (a tool call, the end of the turn).
type Text struct {
	Block int
	Text  string
}

// Thought is the agent's reasoning, streamed; never shown as the answer.
type Thought struct {
	Text string
}

// ToolUse is a tool call the agent makes (or asks to make).
type ToolUse struct {
	ID   string
	Name string
	// Kind is the protocol's kind of tool, where it has one (ACP: read,
	// edit, execute, search, fetch, think, other).
	Kind string
	// Show is what people should read: a shell call's command, the file a
	// call reads or edits, a search's pattern, a fetch's URL; else compact
	// JSON of the input, at most 200 bytes.
	Show  string
	Input json.RawMessage
}

// ToolUpdate changes what a tool call shows while it runs (ACP's
// tool_call_update with a new title or status before its result).
type ToolUpdate struct {
	ID     string
	Show   string
	Status string
}

// ToolResult is what a tool call gave back. For a shell call Stdout and
// Stderr are the command's and ExitCode its exit status (nil when
// unknown); for other calls, and calls that did not run, the result's text
// is Stdout, or Stderr when IsError.
type ToolResult struct {
	ToolUseID string
	IsError   bool
	Stdout    string
	Stderr    string
	ExitCode  *int
}

// Plan is the agent's plan for the turn, whole each time it changes.
type Plan struct {
	Entries []PlanEntry
}

// PlanEntry is one step of a Plan.
type PlanEntry struct {
	Content string
	// Status is pending, in_progress or completed.
	Status   string
	Priority string
}

// PermissionRequest asks whether a tool call may run; the agent waits for
// Conversation.Answer.
type PermissionRequest struct {
	RequestID   string
	ToolName    string
	ToolUseID   string
	Description string
	// Show is what people should read of the call (as ToolUse.Show).
	Show  string
	Input json.RawMessage
	// CanAlways says the agent offers to remember an approval for calls
	// like this one (ACP's allow_always option).
	CanAlways bool
}

// ToolAllowed says the driver allowed tool call ToolUseID itself, asking
// nobody: the agent asked permission for a call the driver knows is
// safe to allow (an ACP agent's call of parley's own MCP server, which
// enforces its own rules). By says on what ground, for people ("parley's
// own tools"); the orchestrator records it as the call's approval.
type ToolAllowed struct {
	ToolUseID string
	By        string
}

// PermissionCancel says the agent withdrew a PermissionRequest (its turn
// ended or was interrupted while it waited).
type PermissionCancel struct {
	RequestID string
}

// APIRetry says the model's API failed and the agent will try again after
// Delay.
type APIRetry struct {
	Attempt int
	Delay   time.Duration
	Error   string
	// Status is the HTTP status the API answered (0: not reached).
	Status int
}

// StopReason says why a turn ended.
type StopReason string

// Why turns end.
const (
	// StopEndTurn: the agent answered.
	StopEndTurn StopReason = "end_turn"
	// StopCancelled: the turn was interrupted (Interrupt, /cancel).
	StopCancelled StopReason = "cancelled"
	// StopDenied: a denial that interrupts ended the turn.
	StopDenied StopReason = "denied"
	// StopRefusal: the model refused to go on.
	StopRefusal StopReason = "refusal"
	// StopMaxTokens: the model's output limit ended the turn.
	StopMaxTokens StopReason = "max_tokens"
	// StopMaxTurns: the agent's limit of model requests ended the turn.
	StopMaxTurns StopReason = "max_turn_requests"
	// StopError: the turn failed; Result.Errors say how.
	StopError StopReason = "error"
)

// Result ends a turn.
type Result struct {
	Stop StopReason
	// Text is the turn's final text, where the protocol reports it.
	Text string
	// Errors are the agent's error messages, when it has any; the first
	// says in a word or a line what went wrong (people read it when an
	// error ended a turn without text).
	Errors []string
	// Origin is set for a turn the agent ran on its own, not for a turn
	// Send handed (Claude Code's "task-notification" when a resumed
	// conversation reports a background command left unfinished).
	Origin string
}

func (Init) isEvent()              {}
func (TextDelta) isEvent()         {}
func (Text) isEvent()              {}
func (Thought) isEvent()           {}
func (ToolUse) isEvent()           {}
func (ToolUpdate) isEvent()        {}
func (ToolResult) isEvent()        {}
func (Plan) isEvent()              {}
func (PermissionRequest) isEvent() {}
func (PermissionCancel) isEvent()  {}
func (ToolAllowed) isEvent()       {}
func (APIRetry) isEvent()          {}
func (Result) isEvent()            {}

// Decision answers a PermissionRequest. Allow runs the call (with
// UpdatedInput when set); Always also asks the agent to allow calls like it
// from now on, where it offered that (CanAlways). A denial gives the model
// Message as the call's error, and with Interrupt also ends the turn.
type Decision struct {
	Allow        bool
	Always       bool
	UpdatedInput json.RawMessage
	Message      string
	Interrupt    bool
}
