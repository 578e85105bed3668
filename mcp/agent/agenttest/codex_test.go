package agenttest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// TestCodexOffline runs codex-acp against the fake Responses API and
// speaks ACP to it directly: a streamed answer; a shell call that asks
// (approval_policy untrusted), allowed once, whose output comes back to us
// and to the model; a rejected one; a tool of an MCP server handed in
// session/new (http, with a header) called by the model, which Codex asks
// about too; a cancelled turn; session/load; more sessions on the same
// process. The package doc records what it showed.
func TestCodexOffline(t *testing.T) {
	api := modeltest.NewResponses(t)
	p := newProbe(t)
	a := agenttest.Codex(t, api, agenttest.CodexConfig{})
	c := startAgent(t, a)
	initialize(t, c, agenttest.CodexACPVersion)
	sid := newSession(t, c, p)

	// The answer streams as agent_message_chunks, and nothing else is
	// said (a model Codex does not know would add a warning here).
	api.Say(modeltest.Chunks(0, "Hello ", "from ", "the fake"))
	tr := c.prompt(sid, "hi", nil, nil)
	if tr.stop != "end_turn" || tr.text() != "Hello from the fake" {
		t.Fatalf("first turn: stop %q text %q", tr.stop, tr.text())
	}
	if r := api.ModelRequests(); len(r) != 1 || r[0].Model != agenttest.CodexModel ||
		!slices.Contains(r[0].Tools, "exec_command") || !slices.Contains(r[0].Tools, "mcp__probe.note") {
		t.Fatalf("first request: %+v", r)
	}

	// A shell call asks before Codex reports the call at all; allowed
	// once, it runs in the work dir, its output is the call's rawOutput
	// and the model's function_call_output.
	const cmd = "echo parley-$((6*7)) | tee made.txt"
	n := len(api.ModelRequests())
	api.Say(modeltest.Text("Running it."), agenttest.CodexShell(cmd))
	api.Say(modeltest.Text("Done."))
	tr = c.prompt(sid, "run it", allowOnce(t), nil)
	if tr.stop != "end_turn" || len(tr.perms) != 1 || tr.text() != "Running it.Done." {
		t.Fatalf("shell turn: stop %q, %d permission requests, text %q", tr.stop, len(tr.perms), tr.text())
	}
	perm := tr.perms[0]
	call := tr.tool(perm.ToolCall.ToolCallID)
	t.Logf("Codex request_permission after %d of the turn's updates: %s, options %+v", perm.at, perm.ToolCall.raw, perm.Options)
	logShapes(t, "Codex shell call", call)
	var out struct {
		Stdout   string `json:"stdout"`
		ExitCode *int   `json:"exit_code"`
	}
	if len(call) > 0 {
		json.Unmarshal(call[len(call)-1].RawOutput, &out)
	}
	if perm.ToolCall.Kind != "execute" || perm.ToolCall.Title != cmd || len(call) == 0 || call[0].SessionUpdate != "tool_call" ||
		slices.ContainsFunc(tr.updates[:perm.at], func(u update) bool { return u.ToolCallID == perm.ToolCall.ToolCallID }) ||
		lastStatus(call) != "completed" || out.Stdout != "parley-42\n" || out.ExitCode == nil || *out.ExitCode != 0 {
		t.Fatalf("shell call: permission %s, updates %d, output %+v", perm.ToolCall.raw, len(call), out)
	}
	reqs := api.ModelRequests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("%d model requests for the shell turn", len(reqs))
	}
	if res := reqs[1].Outputs(); len(res) != 1 || res[0].CallID != perm.ToolCall.ToolCallID || !strings.Contains(res[0].Output, "parley-42") {
		t.Fatalf("the model got %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(a.WorkDir, "made.txt")); err != nil || string(b) != "parley-42\n" {
		t.Fatalf("made.txt: %q %v", b, err)
	}

	// Rejected (Codex's only reject option is "abort"), the call never
	// runs and the whole turn ends as cancelled, without another request.
	n = len(api.ModelRequests())
	api.Say(agenttest.CodexShell("touch rejected.txt"))
	tr = c.prompt(sid, "touch it", rejectOnce(t), nil)
	rejected := tr.perms[0]
	t.Logf("Codex rejected call: permission options %+v, then %s", rejected.Options, tr.kinds())
	if tr.stop != "cancelled" || len(api.ModelRequests()) != n+1 {
		t.Fatalf("rejected turn: stop %q, %d model requests", tr.stop, len(api.ModelRequests())-n)
	}
	if _, err := os.Stat(filepath.Join(a.WorkDir, "rejected.txt")); !os.IsNotExist(err) {
		t.Fatalf("the rejected command ran: %v", err)
	}

	// The model calls the probe's tool in namespace mcp__probe; Codex asks
	// about MCP tools too (after reporting the call), and the call
	// reaches the probe with its header, its result the model.
	n = len(api.ModelRequests())
	api.Say(agenttest.CodexMCPTool("probe", "note", map[string]string{"text": "hello mcp"}))
	api.Say(modeltest.Text("Noted."))
	tr = c.prompt(sid, "note it", allowOnce(t), nil)
	if calls := p.waitCall(t, 1); tr.stop != "end_turn" || len(tr.perms) != 1 || !slices.Equal(calls, []string{"hello mcp"}) || p.refusals() != 0 {
		t.Fatalf("MCP turn: stop %q, %d permission requests, probe calls %q, %d refused", tr.stop, len(tr.perms), calls, p.refusals())
	}
	t.Logf("Codex MCP permission after %d of the turn's updates: %s, options %+v", tr.perms[0].at, tr.perms[0].ToolCall.raw, tr.perms[0].Options)
	logShapes(t, "Codex MCP call", tr.updates)
	reqs = api.ModelRequests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("%d model requests for the MCP turn", len(reqs))
	}
	// The rejected call reached the model with this turn: aborted, and
	// the turn marked as interrupted.
	aborted := slices.ContainsFunc(reqs[0].Outputs(), func(it modeltest.Item) bool {
		return it.CallID == rejected.ToolCall.ToolCallID && strings.Contains(it.Output, "aborted")
	})
	marked := slices.ContainsFunc(reqs[0].Texts("user"), func(s string) bool { return strings.Contains(s, "<turn_aborted>") })
	if !aborted || !marked {
		t.Fatalf("the refusal did not reach the model with the next turn: %+v", reqs[0].Input)
	}
	if res := reqs[1].Outputs(); len(res) == 0 || !strings.Contains(res[len(res)-1].Output, "noted: hello mcp") {
		t.Fatalf("the model got %+v", res)
	}

	cancelTurn(t, c, sid, api.Say)

	replay := loadSession(t, c, sid, p)
	if !replayed(replay, "user_message_chunk", "run it") || !replayed(replay, "agent_message_chunk", "Hello from the fake") {
		t.Fatalf("the load replayed %s", replay.kinds())
	}

	moreSessions(t, c, p, 3)
	t.Logf("Codex tried to reach (refused): %q", a.Offline.Hosts())
}
