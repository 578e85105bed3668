package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// agent.state keeps a little of an agent's own state with the session, in
// parley's store: its watermark (the last inbox message it has fully
// handled), the id of its own conversation. An agent that restarts — or a
// runtime that drives agents, like the orchestrator and the channel of
// `parley mcp --channel` — reads it back instead of keeping a file of its
// own, so what it handled survives wherever parley's data does. A value is
// written durably before the tool answers. It is scoped to the session (a
// bound connection reaches its own only) and a key names one part.

// Limits of agent.state.
const (
	// MaxAgentStateValue is the largest value agent.state keeps.
	MaxAgentStateValue = 4096
	agentStatePrefix   = "agent/"
)

var agentStateKey = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

type agentStateArgs struct {
	Key       string  `json:"key"`
	Value     *string `json:"value"`
	SessionID string  `json:"session_id"`
}

// agentStateResult is agent.state's answer: the value now kept ("" when
// none was ever set).
type agentStateResult struct {
	Key       string         `json:"key"`
	Value     string         `json:"value"`
	SessionID core.SessionID `json:"session_id"`
}

// AgentStateCursor is the store cursor agent.state keeps session id's key
// in. A runtime that holds the session's lease (the orchestrator, with
// several instances) writes it fenced under that name itself, so that a
// holder that lost the lease cannot set the state back.
func AgentStateCursor(id core.SessionID, key string) string {
	return agentStatePrefix + string(id) + "/" + key
}

func (s *Server) addAgentStateTool() {
	s.addTool("agent.state", fmt.Sprintf("Read, or with value set, the agent's own state kept with the session under key "+
		"(for example its watermark: the last inbox message id it fully handled). Durable before it answers; at most %d bytes a value.", MaxAgentStateValue),
		s.agentState,
		mcp.WithString("key", mcp.Required(), mcp.Description("The part of the state: lower-case letters, digits, '.', '_' or '-', at most 64.")),
		mcp.WithString("value", mcp.Description("The new value; omit to read.")),
		mcp.WithString("session_id", mcp.Description("The session; defaults to the session this connection is bound to.")),
		mcp.WithIdempotentHintAnnotation(true), mcp.WithDestructiveHintAnnotation(false), mcp.WithOpenWorldHintAnnotation(false),
	)
}

func (s *Server) agentState(ctx context.Context, raw json.RawMessage) (any, error) {
	var a agentStateArgs
	if err := bind(raw, &a); err != nil {
		return nil, err
	}
	if !agentStateKey.MatchString(a.Key) {
		return nil, toolError(fmt.Sprintf("key %q: use lower-case letters, digits, '.', '_' or '-', at most 64, starting with a letter or digit", a.Key))
	}
	id, err := s.sessionFor(ctx, "agent.state", a.SessionID, true)
	if err != nil {
		return nil, err
	}
	name := AgentStateCursor(id, a.Key)
	if a.Value != nil {
		if len(*a.Value) > MaxAgentStateValue {
			return nil, toolError(fmt.Sprintf("value is %d bytes; agent.state keeps at most %d", len(*a.Value), MaxAgentStateValue))
		}
		if err := s.opts.Store.SetCursor(ctx, name, *a.Value); err != nil {
			return nil, err
		}
		return agentStateResult{Key: a.Key, Value: *a.Value, SessionID: id}, nil
	}
	v, err := s.opts.Store.Cursor(ctx, name)
	if err != nil {
		return nil, err
	}
	return agentStateResult{Key: a.Key, Value: v, SessionID: id}, nil
}
