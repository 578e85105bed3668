package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// TestChannelWithClaudeCode starts the real Claude Code CLI with
// `parley mcp --channel` as its MCP server, as a user's .mcp.json would,
// against a fake model that calls the reply tool: Claude Code connects,
// settles on the initialize-era protocol (the condition for it to register
// channel events; their delivery itself needs a claude.ai login, so it
// cannot run here), calls mcp__parley__reply, and the reply is in the
// session.
func TestChannelWithClaudeCode(t *testing.T) {
	t.Parallel()
	cli := claudetest.CLI(t)
	dir, listen := t.TempDir(), freeAddr(t)
	startDaemon(t, dir, listen)
	session := postChat(t, listen, "", "hello")
	// The model calls the reply tool, then ends its turn.
	api := claudetest.NewAPI(t)
	api.Script(claudetest.Reply{Blocks: []claudetest.Block{claudetest.Tool("mcp__parley__reply", map[string]any{"text": "hi from Claude Code"})}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Text("done")}})
	env := claudetest.Env(t, api.URL)
	var home string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"parley": map[string]any{
		"command": parleyBin(t), "args": []string{"mcp", "--channel", "--url", "http://" + listen + "/mcp", "--session", session},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(home, "mcp.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, "-p", "answer the chat", "--mcp-config", cfgFile, "--strict-mcp-config", "--debug",
		"--allowedTools", "mcp__parley__reply", "--output-format", "stream-json", "--verbose")
	cmd.Dir = home
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()

	var initLine struct {
		Type       string   `json:"type"`
		Subtype    string   `json:"subtype"`
		SessionID  string   `json:"session_id"`
		Tools      []string `json:"tools"`
		MCPServers []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"mcp_servers"`
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 4<<20)
	for initLine.Subtype != "init" {
		if !lines.Scan() {
			t.Fatal("Claude Code ended before its init line")
		}
		_ = json.Unmarshal(lines.Bytes(), &initLine)
	}
	if len(initLine.MCPServers) != 1 || initLine.MCPServers[0].Status != "connected" {
		t.Fatalf("MCP servers %+v, want parley connected", initLine.MCPServers)
	}
	found := false
	for _, tool := range initLine.Tools {
		found = found || tool == "mcp__parley__reply"
	}
	if !found {
		t.Fatalf("tools %v lack mcp__parley__reply", initLine.Tools)
	}
	debug := filepath.Join(home, ".claude", "debug", initLine.SessionID+".txt")
	var established string
	servetest.PollUntil(t, 20*time.Second, "Claude Code's debug log of the connection", func() bool {
		b, _ := os.ReadFile(debug)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `MCP server "parley": Connection established`) {
				established = l
				return true
			}
		}
		return false
	}, nil)
	if !strings.Contains(established, `"protocolEra":"legacy"`) || !strings.Contains(established, `"negotiatedProtocolVersion":"2025-11-25"`) {
		t.Fatalf("Claude Code connected with %s: on a modern connection it drops channel events", established)
	}

	var result struct {
		Type    string `json:"type"`
		Subtype string `json:"subtype"`
		Result  string `json:"result"`
	}
	for result.Type != "result" {
		if !lines.Scan() {
			t.Fatal("Claude Code ended before its result line")
		}
		_ = json.Unmarshal(lines.Bytes(), &result)
	}
	if result.Subtype != "success" {
		t.Fatalf("Claude Code's turn ended %s: %s", result.Subtype, result.Result)
	}
	reqs := api.ModelRequests()
	if len(reqs) < 2 {
		t.Fatalf("%d model requests, want the tool call's and the one after its result", len(reqs))
	}
	results := reqs[1].ToolResults()
	if len(results) != 1 || !strings.Contains(results[0].Text, "sent (message ") {
		t.Fatalf("the model got the tool results %+v, want the reply tool's \"sent\"", results)
	}
	if !strings.Contains(string(reqs[0].Body), "is a channel of a parley session") {
		t.Error("the channel's instructions are not in the model's system prompt")
	}
	agent := connectAgent(t, listen)
	var read readResult
	agent.call(t, "chat_read_since", map[string]any{"session_id": session, "author": "assistant"}, &read)
	if len(read.Messages) != 1 || read.Messages[0].Content != "hi from Claude Code" {
		t.Fatalf("assistant messages %+v, want the reply", read.Messages)
	}
}
