package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestChannelFlags: --title belongs to a channel that creates its session.
func TestChannelFlags(t *testing.T) {
	for _, args := range [][]string{{"mcp", "--title", "x"}, {"mcp", "--channel", "--session", "S", "--title", "x"}} {
		var stderr bytes.Buffer
		if code := Run(context.Background(), args, nil, strings.NewReader(""), io.Discard, &stderr); code != exitUsage || !strings.Contains(stderr.String(), "--title") {
			t.Errorf("%v: exit %d, %q", args, code, stderr.String())
		}
	}
}

// TestMCPCommandRelaysToTheDaemon: `parley mcp` as an agent that only
// launches local servers runs it, with the daemon's address and token from
// the same variables as serve's (a wildcard listen address is dialled on
// loopback): it answers initialize and tools/list over stdin and stdout
// with the running daemon's tools, and ends when stdin ends. With a wrong
// token, the agent's initialize gets an error that says so, not silence.
func TestMCPCommandRelaysToTheDaemon(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	// A token long enough for an address other machines reach.
	const token = "2f6b1c0e9a8d7f6e5d4c3b2a19080706"
	cfg.DataDir, cfg.HTTP.Listen, cfg.HTTP.Token = t.TempDir(), "127.0.0.1:0", token
	m := servetest.Start(t, cfg, platforms.All())
	_, port, _ := net.SplitHostPort(m.Addr())
	env := []string{"PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_HTTP_LISTEN=0.0.0.0:" + port, "PARLEY_HTTP_TOKEN=" + token}

	replies, stderr := mcpCommand(t, env, nil, 2,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if init, _ := replies[1]["result"].(map[string]any); init["serverInfo"] == nil {
		t.Fatalf("initialize answered %v (stderr %s)", replies[1], stderr)
	}
	if tools, _ := json.Marshal(replies[2]); !strings.Contains(string(tools), `"chat.assistant.post"`) {
		t.Fatalf("tools/list answered %s", tools)
	}

	replies, stderr = mcpCommand(t, env, []string{"--token", "wrong-token-of-sixteen-chars"}, 1,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if refusal, _ := json.Marshal(replies[1]["error"]); replies[1]["error"] == nil || !strings.Contains(string(refusal)+stderr, "token") {
		t.Errorf("with a wrong token, initialize answered %v (stderr %s)", replies[1], stderr)
	}
}

// mcpCommand runs `parley mcp` with args and env, writes requests to its
// stdin, reads its stdout until it has answered n requests, then closes
// stdin and waits for it to end with exit code 0. It returns the answers
// by id and what it wrote on stderr.
func mcpCommand(t *testing.T, env, args []string, n int, requests ...string) (map[float64]map[string]any, string) {
	t.Helper()
	stdin, feed := io.Pipe()
	stdout, out := io.Pipe()
	var stderr servetest.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(t.Context(), append([]string{"mcp"}, args...), env, stdin, out, &stderr)
		out.Close()
	}()
	go func() { _, _ = io.WriteString(feed, strings.Join(requests, "\n")+"\n") }()
	replies := map[float64]map[string]any{}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	for len(replies) < n && lines.Scan() {
		var msg map[string]any
		if err := json.Unmarshal(lines.Bytes(), &msg); err != nil {
			t.Fatalf("stdout carries something else than the protocol: %q", lines.Text())
		}
		if id, ok := msg["id"].(float64); ok {
			replies[id] = msg
		}
	}
	feed.Close()
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Errorf("parley mcp %q: exit %d when stdin ended: %s", args, code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("parley mcp %q did not end with its stdin", args)
	}
	return replies, stderr.String()
}
