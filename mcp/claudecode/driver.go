package claudecode

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/parley-chat/parley/mcp/agent"
)

// Driver runs Claude Code for parley's orchestrator: it is the
// agent.Driver of [agent] kind = "claude-code", over a Runner. Claude Code
// takes the conversation's name from its client (--session-id), so the
// Driver is an agent.Namer: the orchestrator saves a name NewConversation
// made before anything starts. A Conversation is one Process, its events
// turned into agent's as they are read:
//
//   - ToolUse and PermissionRequest carry Show, what people read of the
//     call (Show: the command, the file, the pattern, the URL).
//   - Result.Stop says why the turn ended: terminal_reason
//     aborted_streaming (an interrupt) is StopCancelled, aborted_tools (a
//     denial that interrupts) StopDenied, the subtype error_max_turns
//     StopMaxTurns, the model's stop_reason refusal and max_tokens
//     StopRefusal and StopMaxTokens, any other error StopError — its
//     Errors the result's subtype first, then the line's errors — and the
//     rest StopEndTurn.
//   - Claude Code sends no thoughts, plans or tool updates, and offers no
//     "always allow" (PermissionRequest.CanAlways is false).
//
// StartRequest.Tools reaches Claude Code as --mcp-config, a file in the
// process's own TMPDIR (mode 0600: it holds the session's credential),
// naming parley's MCP server "parley" (Streamable HTTP with the
// credential's headers, or the stdio proxy when there is no URL), and
// --allowedTools mcp__parley: the agent's calls of parley's own tools ask
// nobody.
type Driver struct {
	r *Runner
}

var (
	_ agent.Driver = (*Driver)(nil)
	_ agent.Namer  = (*Driver)(nil)
)

// NewDriver returns the Driver of r's processes.
func NewDriver(r *Runner) *Driver { return &Driver{r: r} }

// NewConversation implements agent.Namer: a random (version 4) UUID, the
// form --session-id takes.
func (d *Driver) NewConversation() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Start implements agent.Driver: Runner.Start of req's conversation, keyed
// by its session, with its tools.
func (d *Driver) Start(ctx context.Context, req agent.StartRequest) (agent.Conversation, error) {
	cfg, err := mcpConfig(req.Tools)
	if err != nil {
		return nil, err
	}
	p, err := d.r.start(ctx, req.Session, req.Conversation, req.Resume, cfg)
	if err != nil {
		return nil, err
	}
	c := &conversation{p: p, events: make(chan agent.Event)}
	go c.forward()
	return c, nil
}

// toolsServer is the name parley's MCP server has in Claude Code's
// configuration: its tools are mcp__parley__<tool>.
const toolsServer = "parley"

// mcpConfig is the --mcp-config of tools, nil for none.
func mcpConfig(t agent.Tools) ([]byte, error) {
	var server map[string]any
	switch {
	case t.URL != "":
		server = map[string]any{"type": "http", "url": t.URL}
		if len(t.Header) > 0 {
			server["headers"] = t.Header
		}
	case len(t.Stdio) > 0:
		env := map[string]string{}
		for _, kv := range t.StdioEnv {
			if k, v, ok := cutEnv(kv); ok {
				env[k] = v
			}
		}
		server = map[string]any{"type": "stdio", "command": t.Stdio[0], "args": t.Stdio[1:], "env": env}
	default:
		return nil, nil
	}
	b, err := json.Marshal(map[string]any{"mcpServers": map[string]any{toolsServer: server}})
	if err != nil {
		return nil, fmt.Errorf("claudecode: MCP configuration: %w", err)
	}
	return b, nil
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], i > 0
		}
	}
	return "", "", false
}

// conversation is a Process seen as an agent.Conversation.
type conversation struct {
	p      *Process
	events chan agent.Event
}

var _ agent.Conversation = (*conversation)(nil)

// forward turns the process's events into agent's, in order; Events closes
// when the process's do.
func (c *conversation) forward() {
	defer close(c.events)
	for ev := range c.p.Events() {
		c.events <- toAgent(ev)
	}
}

func (c *conversation) ID() string                                  { return c.p.conversation }
func (c *conversation) Send(ctx context.Context, text string) error { return c.p.Send(ctx, text) }
func (c *conversation) Events() <-chan agent.Event                  { return c.events }
func (c *conversation) Interrupt(ctx context.Context) error         { return c.p.Interrupt(ctx) }
func (c *conversation) Stop() error                                 { return c.p.Stop() }
func (c *conversation) Done() <-chan struct{}                       { return c.p.Done() }
func (c *conversation) Err() error                                  { return c.p.Err() }

// Answer implements agent.Conversation. Claude Code has no "always":
// d.Always allows this call only.
func (c *conversation) Answer(requestID string, d agent.Decision) error {
	return c.p.Answer(requestID, Decision{Allow: d.Allow, UpdatedInput: d.UpdatedInput, Message: d.Message, Interrupt: d.Interrupt})
}

// toAgent is ev as an agent.Event.
func toAgent(ev Event) agent.Event {
	switch e := ev.(type) {
	case Init:
		return agent.Init{Conversation: e.SessionID, Model: e.Model}
	case TextDelta:
		return agent.TextDelta{Block: e.Block, Text: e.Text}
	case Text:
		return agent.Text{Block: e.Block, Text: e.Text}
	case ToolUse:
		return agent.ToolUse{ID: e.ID, Name: e.Name, Show: Show(e.Name, e.Input), Input: e.Input}
	case ToolResult:
		return agent.ToolResult{ToolUseID: e.ToolUseID, IsError: e.IsError, Stdout: e.Stdout, Stderr: e.Stderr, ExitCode: e.ExitCode}
	case PermissionRequest:
		return agent.PermissionRequest{RequestID: e.RequestID, ToolName: e.ToolName, ToolUseID: e.ToolUseID,
			Description: e.Description, Show: Show(e.ToolName, e.Input), Input: e.Input}
	case PermissionCancel:
		return agent.PermissionCancel{RequestID: e.RequestID}
	case APIRetry:
		return agent.APIRetry{Attempt: e.Attempt, Delay: e.Delay, Error: e.Error, Status: e.Status}
	case Result:
		return agent.Result{Stop: stopReason(e), Text: e.Text, Errors: resultErrors(e), Origin: e.Origin}
	}
	panic(fmt.Sprintf("claudecode: no agent event for %T", ev))
}

// stopReason is why the turn r ends ended (see Driver).
func stopReason(r Result) agent.StopReason {
	switch {
	case r.TerminalReason == "aborted_streaming":
		return agent.StopCancelled
	case r.TerminalReason == "aborted_tools":
		return agent.StopDenied
	case r.Subtype == "error_max_turns":
		return agent.StopMaxTurns
	case r.StopReason == "refusal":
		return agent.StopRefusal
	case r.StopReason == "max_tokens":
		return agent.StopMaxTokens
	case r.IsError:
		return agent.StopError
	}
	return agent.StopEndTurn
}

// resultErrors are the Errors of r as an agent.Result: for an error, its
// subtype first, which says what kind of error it was.
func resultErrors(r Result) []string {
	if !r.IsError || r.Subtype == "" {
		return r.Errors
	}
	return append([]string{r.Subtype}, r.Errors...)
}
