package agenttest_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// The steps both preflight tests take, against either agent.

// caps is what initialize answered, the part the driver depends on.
type caps struct {
	ProtocolVersion   int `json:"protocolVersion"`
	AgentCapabilities struct {
		LoadSession bool `json:"loadSession"`
		MCP         struct {
			HTTP bool `json:"http"`
			SSE  bool `json:"sse"`
		} `json:"mcpCapabilities"`
	} `json:"agentCapabilities"`
	AgentInfo struct {
		Name    string `json:"name"`
		Version string `json:"version"`
	} `json:"agentInfo"`
}

// initialize opens the connection: protocol version 1, and a client that
// offers neither file system nor terminal (the agent uses its own).
func initialize(t *testing.T, c *acpConn, version string) caps {
	t.Helper()
	start := time.Now()
	res := c.must("initialize", map[string]any{
		"protocolVersion": 1,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
		"clientInfo": map[string]string{"name": "parley-agenttest", "version": "0"},
	}, nil)
	t.Logf("%s initialize: %v, RSS %d MiB: %s", c.agent.Name, time.Since(start).Round(time.Millisecond), c.rss(), res)
	var cp caps
	if err := json.Unmarshal(res, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.ProtocolVersion != 1 || !cp.AgentCapabilities.LoadSession || !cp.AgentCapabilities.MCP.HTTP ||
		cp.AgentInfo.Version != version {
		t.Fatalf("%s capabilities %s", c.agent.Name, res)
	}
	return cp
}

// newSession opens a session in the agent's work dir with the probe as
// its MCP server.
func newSession(t *testing.T, c *acpConn, p *probe) string {
	t.Helper()
	start := time.Now()
	var tr turn
	res := c.must("session/new", map[string]any{"cwd": c.agent.WorkDir, "mcpServers": []any{p.server()}},
		c.collect("", &tr, nil, nil))
	var r struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(res, &r); err != nil || r.SessionID == "" {
		t.Fatalf("%s: session/new %s", c.agent.Name, res)
	}
	t.Logf("%s session/new: %v, RSS %d MiB, id %s", c.agent.Name, time.Since(start).Round(time.Millisecond), c.rss(), r.SessionID)
	return r.SessionID
}

// moreSessions opens n more sessions on the same process and logs what
// each costs.
func moreSessions(t *testing.T, c *acpConn, p *probe, n int) {
	t.Helper()
	before, start := c.rss(), time.Now()
	for range n {
		newSession(t, c, p)
	}
	t.Logf("%s: %d more sessions in %v, RSS %d → %d MiB", c.agent.Name, n, time.Since(start).Round(time.Millisecond), before, c.rss())
}

// cancelTurn holds the model after a first piece of text and cancels the
// turn there (session/cancel is a notification); the prompt must answer
// stopReason "cancelled" without the rest.
func cancelTurn(t *testing.T, c *acpConn, sid string, say func(...modeltest.Block)) {
	t.Helper()
	gate := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(gate) }) }
	t.Cleanup(open) // before the fake closes: it would wait for the held stream
	say(modeltest.Text("partial"), modeltest.Block{Chunks: []string{"never shown"}, Wait: gate})
	var cancelled time.Time
	tr := c.prompt(sid, "count to a million", nil, func(u update) {
		if cancelled.IsZero() && u.SessionUpdate == "agent_message_chunk" && strings.Contains(u.text(), "partial") {
			cancelled = time.Now()
			c.notify("session/cancel", map[string]string{"sessionId": sid})
		}
	})
	if cancelled.IsZero() || tr.stop != "cancelled" || strings.Contains(tr.text(), "never") {
		t.Fatalf("%s: cancel: stop %q, text %q", c.agent.Name, tr.stop, tr.text())
	}
	t.Logf("%s: session/cancel → stopReason cancelled in %v", c.agent.Name, time.Since(cancelled).Round(time.Millisecond))
}

// loadSession loads sid again on the same process: the agent replays the
// conversation as session/updates before it answers. It returns the
// replay. A session it does not know is an error.
func loadSession(t *testing.T, c *acpConn, sid string, p *probe) turn {
	t.Helper()
	var tr turn
	start := time.Now()
	c.must("session/load", map[string]any{"sessionId": sid, "cwd": c.agent.WorkDir, "mcpServers": []any{p.server()}},
		c.collect(sid, &tr, nil, nil))
	t.Logf("%s session/load: %v, replayed %s", c.agent.Name, time.Since(start).Round(time.Millisecond), tr.kinds())
	var ignored turn
	_, err := c.call("session/load", map[string]any{"sessionId": "ses_0123456789abcdefghijklmnop", "cwd": c.agent.WorkDir,
		"mcpServers": []any{}}, c.collect("", &ignored, nil, nil))
	if err == nil {
		t.Fatalf("%s loaded a session it never had", c.agent.Name)
	}
	t.Logf("%s session/load of an unknown id: error %d %q %s", c.agent.Name, err.Code, err.Message, err.Data)
	return tr
}

// replayed says whether the replay of a load holds a chunk of kind with
// text.
func replayed(tr turn, kind, text string) bool {
	for _, u := range tr.updates {
		if u.SessionUpdate == kind && strings.Contains(u.text(), text) {
			return true
		}
	}
	return false
}

// lastStatus is the last status a tool call's updates gave it.
func lastStatus(us []update) string {
	s := ""
	for _, u := range us {
		if u.Status != "" {
			s = u.Status
		}
	}
	return s
}

// logShapes writes a tool call's updates to the test log as the agent sent
// them: the package doc's record of their shapes.
func logShapes(t *testing.T, name string, us []update) {
	t.Helper()
	for _, u := range us {
		t.Logf("%s %s", name, u.raw)
	}
}
