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
	options []permissionOption
}

// cancelledOutcome answers a permission request nobody decided: its turn
// ended or was cancelled.
var cancelledOutcome = map[string]any{"outcome": map[string]string{"outcome": "cancelled"}}

// permission reports a permission request of the agent's, on the reader;
// false when the conversation cannot take it (it ended or loads).
func (c *conversation) permission(id json.RawMessage, r permissionParams) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended || c.loading {
		return false
	}
	c.closeBlock()
	reqID := fmt.Sprintf("%d:%s", c.p.gen, id)
	c.pending[reqID] = &permission{id: id, options: r.Options}
	tc := r.ToolCall
	title := ""
	if tc.Title != nil {
		title = *tc.Title
	}
	name := tc.Kind
	if known := c.tools[tc.ToolCallID]; known != nil && known.toolName() != "" {
		name = known.toolName()
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
		Show: showCall(tc.Kind, title, tc.RawInput, tc.Locations), Input: tc.RawInput, CanAlways: canAlways,
	})
	return true
}

// Answer implements agent.Conversation: Allow selects the agent's
// allow_once option, Always its allow_always where offered; a denial
// selects reject_once, and with Interrupt also cancels the turn
// (session/cancel; the turn then ends StopDenied). ACP carries no message
// for the model and no changed input: Decision.Message and UpdatedInput
// are not passed on (the agent tells its model the call was rejected in
// its own words).
func (c *conversation) Answer(requestID string, d agent.Decision) error {
	c.mu.Lock()
	perm := c.pending[requestID]
	delete(c.pending, requestID)
	t := c.turn
	if perm != nil && !d.Allow && d.Interrupt && t != nil {
		t.denied = true
	}
	id := c.id
	c.mu.Unlock()
	if perm == nil {
		return fmt.Errorf("acp: no open permission request %q", requestID)
	}
	outcome := cancelledOutcome
	if opt := chooseOption(perm.options, d); opt != "" {
		outcome = map[string]any{"outcome": map[string]string{"outcome": "selected", "optionId": opt}}
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
		c.push(agent.PermissionCancel{RequestID: reqID})
		c.p.c.respondLater(perm.id, cancelledOutcome, nil)
	}
}
