package mcp

import (
	"strings"
	"testing"
)

// TestAgentState: a value set is read back, after a restart of the daemon
// too; it is per session and per key; a bound connection reaches only its
// own session's; bad keys and oversized values are refused.
func TestAgentState(t *testing.T) {
	dir := t.TempDir()
	st := newStack(t, dir, stackOptions{})
	a, b := st.createSession(""), st.createSession("")
	c := mustDial(t, st.url, connOptions{})
	var res agentStateResult
	c.ok(t, "agent.state", map[string]any{"session_id": string(a), "key": "watermark"}, &res)
	if res.Value != "" || res.SessionID != a {
		t.Fatalf("unset state = %+v, want empty", res)
	}
	c.ok(t, "agent.state", map[string]any{"session_id": string(a), "key": "watermark", "value": "m42"}, &res)
	c.ok(t, "agent_state", map[string]any{"session_id": string(b), "key": "watermark", "value": "m7"}, &res)
	c.ok(t, "agent.state", map[string]any{"session_id": string(a), "key": "conversation", "value": "c-1"}, &res)
	c.ok(t, "agent.state", map[string]any{"session_id": string(a), "key": "watermark"}, &res)
	if res.Value != "m42" {
		t.Fatalf("state of a = %+v, want m42", res)
	}

	bound := mustDial(t, st.url, connOptions{query: "session=" + string(b)})
	bound.ok(t, "agent.state", map[string]any{"key": "watermark"}, &res)
	if res.Value != "m7" || res.SessionID != b {
		t.Fatalf("bound state = %+v, want b's m7", res)
	}
	bound.fails(t, "agent.state", map[string]any{"session_id": string(a), "key": "watermark"}, "bound to session")
	c.fails(t, "agent.state", map[string]any{"key": "watermark"}, "needs session_id")
	c.fails(t, "agent.state", map[string]any{"session_id": string(a), "key": "../x"}, "lower-case letters")
	c.fails(t, "agent.state", map[string]any{"session_id": string(a), "key": "w", "value": strings.Repeat("x", MaxAgentStateValue+1)}, "at most 4096")

	st.close()
	st = newStack(t, dir, stackOptions{})
	c = mustDial(t, st.url, connOptions{})
	c.ok(t, "agent.state", map[string]any{"session_id": string(a), "key": "conversation"}, &res)
	if res.Value != "c-1" {
		t.Fatalf("after a restart = %+v, want c-1", res)
	}
}
