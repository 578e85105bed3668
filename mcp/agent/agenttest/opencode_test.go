package agenttest_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// TestOpenCodeOffline runs `opencode acp` against the fake Messages API
// and speaks ACP to it directly: a streamed answer; a shell call that asks
// (permission bash: ask), allowed once, whose output comes back to us and
// to the model; a rejected one; a tool of an MCP server handed in
// session/new (http, with a header) called by the model; a cancelled
// turn; session/load; more sessions on the same process. The package doc
// records what it showed.
func TestOpenCodeOffline(t *testing.T) {
	api := modeltest.NewMessages(t)
	p := newProbe(t)
	a := agenttest.OpenCode(t, api, agenttest.OpenCodeConfig{AskBash: true})
	c := startAgent(t, a)
	initialize(t, c, agenttest.OpenCodeVersion)
	sid := newSession(t, c, p)

	// The answer streams as agent_message_chunks.
	api.Say(modeltest.Chunks(0, "Hello ", "from ", "the fake"))
	tr := c.prompt(sid, "hi", nil, nil)
	if tr.stop != "end_turn" || tr.text() != "Hello from the fake" {
		t.Fatalf("first turn: stop %q text %q", tr.stop, tr.text())
	}

	// A shell call asks; allowed once, it runs in the work dir, its output
	// is the call's content and the model's tool result.
	const cmd = "echo parley-$((6*7)) | tee made.txt"
	n := len(api.ModelRequests())
	api.Say(modeltest.Text("Running it."), agenttest.OpenCodeBash(cmd, "Print a number"))
	api.Say(modeltest.Text("Done."))
	tr = c.prompt(sid, "run it", allowOnce(t), nil)
	if tr.stop != "end_turn" || len(tr.perms) != 1 || tr.text() != "Running it.Done." {
		t.Fatalf("shell turn: stop %q, %d permission requests, text %q", tr.stop, len(tr.perms), tr.text())
	}
	perm := tr.perms[0]
	call := tr.tool(perm.ToolCall.ToolCallID)
	t.Logf("OpenCode request_permission after %d of the turn's updates: %s, options %+v", perm.at, perm.ToolCall.raw, perm.Options)
	logShapes(t, "OpenCode shell call", call)
	if !strings.Contains(string(perm.ToolCall.RawInput), `"command":"echo parley-$((6*7)) | tee made.txt"`) ||
		perm.ToolCall.Kind != "execute" || perm.ToolCall.Title != cmd || len(call) == 0 || call[0].SessionUpdate != "tool_call" ||
		lastStatus(call) != "completed" || !strings.Contains(call[len(call)-1].contentText(), "parley-42") {
		t.Fatalf("shell call: permission %s, updates %d", perm.ToolCall.raw, len(call))
	}
	reqs := api.ModelRequests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("%d model requests for the shell turn", len(reqs))
	}
	if res := reqs[1].ToolResults(); len(res) != 1 || res[0].ToolUseID != perm.ToolCall.ToolCallID ||
		res[0].IsError || strings.TrimSpace(res[0].Text) != "parley-42" {
		t.Fatalf("the model got %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(a.WorkDir, "made.txt")); err != nil || string(b) != "parley-42\n" {
		t.Fatalf("made.txt: %q %v", b, err)
	}

	// Rejected, the call fails and the turn ends: OpenCode does not ask
	// the model again (the refusal reaches it with the next turn).
	n = len(api.ModelRequests())
	api.Say(agenttest.OpenCodeBash("touch rejected.txt", "Touch a file"))
	tr = c.prompt(sid, "touch it", rejectOnce(t), nil)
	rejected := tr.perms[0].ToolCall.ToolCallID
	call = tr.tool(rejected)
	logShapes(t, "OpenCode rejected call", call)
	if tr.stop != "end_turn" || lastStatus(call) != "failed" || len(api.ModelRequests()) != n+1 {
		t.Fatalf("rejected turn: stop %q, status %q, %d model requests", tr.stop, lastStatus(call), len(api.ModelRequests())-n)
	}
	if _, err := os.Stat(filepath.Join(a.WorkDir, "rejected.txt")); !os.IsNotExist(err) {
		t.Fatalf("the rejected command ran: %v", err)
	}

	// The model calls the probe's tool (OpenCode names it SERVER_TOOL and
	// does not ask for MCP tools); the call reaches the probe with its
	// header, and its result the model.
	n = len(api.ModelRequests())
	tool := agenttest.OpenCodeMCPTool("probe", "note")
	api.Say(modeltest.Tool(tool, map[string]string{"text": "hello mcp"}))
	api.Say(modeltest.Text("Noted."))
	tr = c.prompt(sid, "note it", nil, nil)
	if calls := p.waitCall(t, 1); tr.stop != "end_turn" || !slices.Equal(calls, []string{"hello mcp"}) || p.refusals() != 0 {
		t.Fatalf("MCP turn: stop %q, probe calls %q, %d refused", tr.stop, calls, p.refusals())
	}
	reqs = api.ModelRequests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("%d model requests for the MCP turn", len(reqs))
	}
	refusal := false
	for _, r := range reqs[0].ToolResults() {
		refusal = refusal || r.ToolUseID == rejected && r.IsError && strings.Contains(r.Text, "rejected")
	}
	if !refusal {
		t.Fatalf("the refusal did not reach the model with the next turn: %+v", reqs[0].ToolResults())
	}
	if res := reqs[1].ToolResults(); len(res) == 0 || res[len(res)-1].Text != "noted: hello mcp" {
		t.Fatalf("the model got %+v", res)
	}
	logShapes(t, "OpenCode MCP call", tr.updates)

	cancelTurn(t, c, sid, api.Say)

	replay := loadSession(t, c, sid, p)
	if !replayed(replay, "user_message_chunk", "run it") || !replayed(replay, "agent_message_chunk", "Hello from the fake") {
		t.Fatalf("the load replayed %s", replay.kinds())
	}

	moreSessions(t, c, p, 3)
	t.Logf("OpenCode tried to reach (refused): %q", a.Offline.Hosts())
}
