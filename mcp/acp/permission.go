package acp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/parley-chat/parley/mcp/agent"
)

// permissionParams are session/request_permission's
// (https://agentclientprotocol.com/protocol/tool-calls#requesting-permission).
type permissionParams struct {
	SessionID string `json:"sessionId"`
	ToolCall  struct {
		ToolCallID string          `json:"toolCallId"`
		Title      *string         `json:"title"`
		Kind       string          `json:"kind"`
		Status     string          `json:"status"`
		Locations  []location      `json:"locations"`
		RawInput   json.RawMessage `json:"rawInput"`
	} `json:"toolCall"`
	Options []permissionOption `json:"options"`
}

type permissionOption struct {
	OptionID string `json:"optionId"`
	Name     string `json:"name"`
	// Kind is allow_once, allow_always, reject_once or reject_always.
	Kind string `json:"kind"`
}

// permission is an open session/request_permission.
type permission struct {
	id      json.RawMessage // the agent's request id
	call    string          // the tool call's id
	options []permissionOption
}

// cancelledOutcome answers a permission request nobody decided: its turn
// ended or was cancelled.
var cancelledOutcome = map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}

// selected is the outcome choosing option id.
func selected(id string) map[string]any {
	return map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": id}}
}

// ownTools is ToolAllowed.By for a call of parley's own MCP server: what
// people read as "approved by parley (its own tools)".
const ownTools = "its own tools"

// permission reports a permission request of the agent's, on the reader;
// false when the conversation cannot take it (it ended or loads). A call
// the agent asks about before it reported it (Codex) is reported first,
// from the request's toolCall, so people read the call they decide on and
// the tool_call that follows is the same call. A request that tells the
// command of a call reported without it updates the call (ToolUpdate). A
// call of parley's own MCP server is allowed at once (ToolAllowed; see ownServerCall).
func (c *conversation) permission(id json.RawMessage, r permissionParams) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.loading {
		return false
	}
	c.closeBlock()
	tc := r.ToolCall
	if tc.ToolCallID != "" && c.tools[tc.ToolCallID] == nil {
		c.toolCall(sessionUpdate{Kind: "tool_call", ToolCallID: tc.ToolCallID, Title: tc.Title, ToolKind: tc.Kind,
			Status: tc.Status, Locations: tc.Locations, RawInput: tc.RawInput})
	}
	known := c.tools[tc.ToolCallID]
	if c.ownServerCall(tc.RawInput, known) {
		if opt := chooseOption(r.Options, agent.Decision{Allow: true}); opt != "" {
			c.p.c.respondLater(id, selected(opt), nil)
			c.push(agent.ToolAllowed{ToolUseID: tc.ToolCallID, By: ownTools})
			return true
		}
	}
	if known != nil && hasCommand(tc.RawInput) {
		// The request tells the command of a call reported without it
		// (OpenCode 1.18.33 under load asks before the update that
		// tells it): the call shows it from now on, whatever follows.
		c.toolCall(sessionUpdate{Kind: "tool_call_update", ToolCallID: tc.ToolCallID, RawInput: tc.RawInput})
	}
	reqID := fmt.Sprintf("%d:%s", c.p.gen, id)
	c.pending[reqID] = &permission{id: id, call: tc.ToolCallID, options: r.Options}
	title := ""
	if tc.Title != nil {
		title = *tc.Title
	}
	name, show := tc.Kind, showCall(tc.Kind, title, tc.RawInput, tc.Locations)
	if known != nil {
		// The call as reported: Codex titles an MCP call's request
		// "Approve MCP tool call", its call "Tool: SERVER/TOOL".
		name, show = known.toolName(), known.show
	} else if title != "" {
		name = title
	}
	canAlways := false
	for _, o := range r.Options {
		if o.Kind == "allow_always" {
			canAlways = true
		}
	}
	c.push(agent.PermissionRequest{
		RequestID: reqID, ToolName: name, ToolUseID: tc.ToolCallID, Description: title,
		Show: show, Input: tc.RawInput, CanAlways: canAlways,
	})
	return true
}

// ownServerCall says whether a permission request (its toolCall's
// rawInput, and the call as reported, if it was) is for a tool of
// parley's own MCP server, the one parley named in this session's
// mcpServers: by the server the agent itself resolved the call to —
// Codex's rawInput.server_name in the request, and rawInput.server in
// its tool_call — never by a title or a tool's name, which another
// server's tool or the model could word as it likes. Under c.mu.
func (c *conversation) ownServerCall(rawInput json.RawMessage, known *toolCall) bool {
	if c.ownServer == "" {
		return false
	}
	var in struct {
		ServerName *string `json:"server_name"`
	}
	if !decode(rawInput, &in) || in.ServerName == nil || *in.ServerName != c.ownServer {
		return false
	}
	if known != nil {
		var call struct {
			Server *string `json:"server"`
		}
		if decode(known.rawInput, &call) && call.Server != nil && *call.Server != c.ownServer {
			return false
		}
	}
	return true
}

// Answer implements agent.Conversation: Allow selects the agent's
// allow_once option, Always its allow_always where offered; a denial
// selects reject_once, and with Interrupt also cancels the turn
// (session/cancel; the turn then ends StopDenied). A turn the agent ends
// as cancelled after a denial it was not asked to cancel for (Codex's
// only reject option ends the turn) ends StopDenied too: the agent's
// doing, not a person's cancel. ACP carries no message
// for the model and no changed input: Decision.Message and UpdatedInput
// are not passed on (the agent tells its model the call was rejected in
// its own words).
func (c *conversation) Answer(requestID string, d agent.Decision) error {
	c.mu.Lock()
	perm := c.pending[requestID]
	delete(c.pending, requestID)
	t := c.turn
	if perm != nil && !d.Allow {
		if t != nil {
			t.denied = true
		}
		c.notRun(perm.call, "Not run: the call was denied.")
	}
	id := c.id
	c.mu.Unlock()
	if perm == nil {
		return fmt.Errorf("acp: no open permission request %q", requestID)
	}
	outcome := cancelledOutcome
	if opt := chooseOption(perm.options, d); opt != "" {
		outcome = selected(opt)
	}
	if err := c.p.c.respond(perm.id, outcome, nil); err != nil {
		return fmt.Errorf("acp: answering the permission request: %w", err)
	}
	if !d.Allow && d.Interrupt && t != nil {
		ctx, cancel := context.WithTimeout(context.Background(), replyTimeout)
		defer cancel()
		return c.p.c.notify(ctx, "session/cancel", map[string]string{"sessionId": id})
	}
	return nil
}

// chooseOption is the option answering d: by kind, in order of preference
// ("" when the agent offered none that fits: the answer is cancelled,
// which runs nothing).
func chooseOption(opts []permissionOption, d agent.Decision) string {
	var prefs []string
	switch {
	case d.Allow && d.Always:
		prefs = []string{"allow_always", "allow_once"}
	case d.Allow:
		prefs = []string{"allow_once", "allow_always"}
	default:
		// Never reject_always for a single denial: it would refuse calls
		// nobody was asked about.
		prefs = []string{"reject_once"}
	}
	for _, kind := range prefs {
		for _, o := range opts {
			if o.Kind == kind {
				return o.OptionID
			}
		}
	}
	return ""
}

// withdrawAll withdraws the open permission requests, under c.mu: people's
// questions go (PermissionCancel) and the agent is answered cancelled.
func (c *conversation) withdrawAll() {
	for reqID, perm := range c.pending {
		delete(c.pending, reqID)
		c.notRun(perm.call, "Not run: nobody decided on it before the turn ended.")
		c.push(agent.PermissionCancel{RequestID: reqID})
		c.p.c.respondLater(perm.id, cancelledOutcome, nil)
	}
}
