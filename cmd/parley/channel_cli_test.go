package main

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
)

// claudeCodeCLI finds the Claude Code CLI the Makefile installs
// ($PARLEY_CLAUDE_CODE_DIR, else ~/.cache/parley/claude-code-2.1.328):
// without it the test is skipped, except on CI, where it fails.
func claudeCodeCLI(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("PARLEY_CLAUDE_CODE_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "parley", "claude-code-2.1.328")
	}
	bin := filepath.Join(dir, "node_modules", ".bin", "claude")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the Claude Code CLI is missing (make test-deps): %v", err)
		}
		t.Skipf("the Claude Code CLI is missing (make test-deps): %v", err)
	}
	return bin
}

// TestChannelWithClaudeCode starts the real Claude Code CLI with
// `parley mcp --channel` as its MCP server, as a user's .mcp.json would:
// it connects, lists the reply tool, and settles on the initialize-era
// protocol, which is the condition for it to register channel events
// (channel delivery itself needs a claude.ai login, so it cannot run here).
func TestChannelWithClaudeCode(t *testing.T) {
	cli := claudeCodeCLI(t)
	dir, listen := t.TempDir(), freeAddr(t)
	startDaemon(t, dir, listen)
	session := postChat(t, listen, "", "hello")

	home := t.TempDir()
	cfg, err := json.Marshal(map[string]any{"mcpServers": map[string]any{"parley": map[string]any{
		"command": os.Args[0], "args": []string{"-test.run=^TestChannelChild$"},
		"env": map[string]string{"PARLEY_CHANNEL_ARGS": strings.Join([]string{"mcp", "--channel", "--url", "http://" + listen + "/mcp", "--session", session}, "\n")},
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
	cmd := exec.CommandContext(ctx, cli, "-p", "hi", "--mcp-config", cfgFile, "--strict-mcp-config", "--debug",
		"--output-format", "stream-json", "--verbose")
	cmd.Dir = home
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAUDE") && !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	// No model answers (nothing listens there): the test needs only the
	// start-up, which connects the MCP servers before the first request.
	cmd.Env = append(env, "HOME="+home, "TMPDIR="+t.TempDir(), "ANTHROPIC_BASE_URL=http://"+freeAddr(t),
		"ANTHROPIC_API_KEY=sk-ant-test", "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
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
	pollUntil(t, 20*time.Second, "Claude Code's debug log of the connection", func() bool {
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
}
