package claudecode

import (
	"encoding/json"
	"time"
)

// Event is one thing a running Claude Code process reported, parsed from
// its stream-json output. The concrete types below are all there is; a
// line of a kind parley does not use is skipped.
type Event interface{ isEvent() }

// Init is the system/init line that starts each turn.
type Init struct {
	// SessionID is Claude Code's conversation id.
	SessionID string
	Model     string
}

// TextDelta is a piece of streamed text (from --include-partial-messages),
// in the order the model produced it. Block counts the text blocks of the
// turn from 0, so a consumer can tell where one block ends.
type TextDelta struct {
	Block int
	Text  string
}

// Text is a finished text block of the assistant's answer: the whole block,
// which the TextDeltas of the same Block add up to.
type Text struct {
	Block int
	Text  string
}

// ToolUse is a finished tool_use block: the model calls Name with Input.
type ToolUse struct {
	ID    string
	Name  string
	Input json.RawMessage
}

// ToolResult is what a tool call gave back to the model. For Bash, Stdout
// and Stderr are the command's and ExitCode its exit status (0 when it
// succeeded, the code Claude Code reports when not, nil when unknown); for
// other tools, and for calls that did not run (a denial), the result's
// text is Stdout, or Stderr when IsError.
type ToolResult struct {
	ToolUseID string
	IsError   bool
	Stdout    string
	Stderr    string
	ExitCode  *int
}

// PermissionRequest is a can_use_tool control request (--permission-prompt-tool
// stdio): Claude Code waits until it is answered with Process.Answer.
type PermissionRequest struct {
	RequestID   string
	ToolName    string
	ToolUseID   string
	Description string
	Input       json.RawMessage
}

// PermissionCancel says Claude Code withdrew a PermissionRequest (a
// control_cancel_request: the turn was interrupted while it waited). The
// question to people should be withdrawn; Answer fails for it.
type PermissionCancel struct {
	RequestID string
}

// APIRetry is a system/api_retry line: the model's API failed and Claude
// Code will try again after Delay.
type APIRetry struct {
	Attempt int
	Delay   time.Duration
	Error   string
	// Status is the HTTP status the API answered (0 when it could not be
	// reached at all).
	Status int
}

// Result ends a turn. Subtype is "success" or an error subtype;
// TerminalReason says how it ended ("aborted_streaming" after an
// interrupt, "aborted_tools" after a denial that interrupts).
type Result struct {
	Subtype        string
	IsError        bool
	TerminalReason string
	// Text is the result line's final text (the last text block).
	Text      string
	SessionID string
	// Errors are the result line's error messages, when it has any.
	Errors []string
	// StopReason is the model's last stop_reason (end_turn, tool_use,
	// max_tokens, refusal, …), empty when the line has none. Omitted from
	// JSON when empty, like Origin.
	StopReason string `json:",omitempty"`
	// Origin is what started a turn Claude Code ran on its own, not for a
	// message sent with Send: "task-notification" when a resumed
	// conversation reports a background command the previous process left
	// unfinished (2.1.328 ends that turn with a result line of its own,
	// before it reads stdin). Empty for a turn Send started. Omitted from
	// JSON when empty, so the recorded golden events stay as they were.
	Origin string `json:",omitempty"`
}

func (Init) isEvent()              {}
func (TextDelta) isEvent()         {}
func (Text) isEvent()              {}
func (ToolUse) isEvent()           {}
func (ToolResult) isEvent()        {}
func (PermissionRequest) isEvent() {}
func (PermissionCancel) isEvent()  {}
func (APIRetry) isEvent()          {}
func (Result) isEvent()            {}

// Decision answers a PermissionRequest: Allow runs the call (with
// UpdatedInput when set, the request's input otherwise); a denial gives the
// model Message as the call's error, and with Interrupt also ends the turn.
type Decision struct {
	Allow        bool
	UpdatedInput json.RawMessage
	Message      string
	Interrupt    bool
}
