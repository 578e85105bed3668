package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// fakeModel answers Claude Code's Messages API requests as a model that
// calls the channel's reply tool once and then ends its turn. It records
// the requests' bodies.
type fakeModel struct {
	mu     sync.Mutex
	bodies []string
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") || strings.Contains(r.URL.Path, "count_tokens") {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not here"}}`, http.StatusNotFound)
		return
	}
	var req struct {
		Stream bool `json:"stream"`
	}
	_ = json.Unmarshal(body, &req)
	// The first turn calls the tool; once its result is in the
	// conversation, the model ends the turn.
	block := map[string]any{"type": "tool_use", "id": "toolu_01", "name": "mcp__parley__reply", "input": map[string]any{}}
	stop, input := "tool_use", `{"text":"hi from Claude Code"}`
	if strings.Contains(string(body), `"tool_result"`) {
		block, stop, input = map[string]any{"type": "text", "text": ""}, "end_turn", ""
	}
	if !req.Stream {
		if input != "" {
			block["input"] = map[string]any{"text": "hi from Claude Code"}
		} else {
			block["text"] = "done"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-test",
			"content": []any{block}, "stop_reason": stop, "usage": map[string]int{"input_tokens": 10, "output_tokens": 5}})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	send := func(event string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_01", "type": "message", "role": "assistant",
		"model": "claude-test", "content": []any{}, "stop_reason": nil, "stop_sequence": nil, "usage": map[string]int{"input_tokens": 10, "output_tokens": 1}}})
	send("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": block})
	if input != "" {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "input_json_delta", "partial_json": input}})
	} else {
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "done"}})
	}
	send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}})
	send("message_stop", map[string]any{"type": "message_stop"})
}

// sent reports whether a request carried text.
func (f *fakeModel) sent(text string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bodies {
		if strings.Contains(b, text) {
			return true
		}
	}
	return false
}

// sawToolResult returns the start of the first tool_result the model got.
func (f *fakeModel) sawToolResult() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bodies {
		if i := strings.Index(b, `"tool_result"`); i >= 0 {
			return b[i:min(len(b), i+300)]
		}
	}
	return ""
}

// TestChannelWithClaudeCode starts the real Claude Code CLI with
// `parley mcp --channel` as its MCP server, as a user's .mcp.json would,
// against a fake model that calls the reply tool: Claude Code connects,
// settles on the initialize-era protocol (the condition for it to register
// channel events; their delivery itself needs a claude.ai login, so it
// cannot run here), calls mcp__parley__reply, and the reply is in the
// session.
func TestChannelWithClaudeCode(t *testing.T) {
	cli := claudeCodeCLI(t)
	dir, listen := t.TempDir(), freeAddr(t)
	startDaemon(t, dir, listen)
	session := postChat(t, listen, "", "hello")
	model := &fakeModel{}
	api := httptest.NewServer(model)
	defer api.Close()

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
	cmd := exec.CommandContext(ctx, cli, "-p", "answer the chat", "--mcp-config", cfgFile, "--strict-mcp-config", "--debug",
		"--allowedTools", "mcp__parley__reply", "--output-format", "stream-json", "--verbose")
	cmd.Dir = home
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CLAUDE") && !strings.HasPrefix(kv, "ANTHROPIC_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "TMPDIR=") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "HOME="+home, "TMPDIR="+t.TempDir(), "ANTHROPIC_BASE_URL="+api.URL,
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
	if tr := model.sawToolResult(); !strings.Contains(tr, "sent (message ") {
		t.Fatalf("the model got the tool result %q, want the reply tool's \"sent\"", tr)
	}
	if !model.sent("is a channel of a parley session") {
		t.Error("the channel's instructions are not in the model's system prompt")
	}
	agent := connectAgent(t, listen)
	var read readResult
	agent.call(t, "chat_read_since", map[string]any{"session_id": session, "author": "assistant"}, &read)
	if len(read.Messages) != 1 || read.Messages[0].Content != "hi from Claude Code" {
		t.Fatalf("assistant messages %+v, want the reply", read.Messages)
	}
}
