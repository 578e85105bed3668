package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tsclient is the official MCP TypeScript SDK client script of the mcp
// package's tests; make test-deps installs its node_modules.
var tsclient = filepath.Join("..", "..", "..", "..", "mcp", "testdata", "tsclient")

func needTSClient(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(tsclient, "node_modules", "@modelcontextprotocol", "sdk", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
			t.Fatalf("node or the MCP TypeScript SDK is missing (make test-deps): %v", err)
		}
		t.Skipf("node or the MCP TypeScript SDK is missing (make test-deps): %v", err)
	}
	return node
}

type tsLine struct {
	Event         string          `json:"event"`
	Message       string          `json:"message"`
	Notifications int             `json:"notifications"`
	Result        json.RawMessage `json:"result"`
}

// TestEndToEndTypeScriptAgent is the same story as
// TestEndToEndAgentAndPeople with the official TypeScript SDK as the agent,
// against a real parley serve process.
func TestEndToEndTypeScriptAgent(t *testing.T) {
	t.Parallel()
	node := needTSClient(t)
	dir, listen := t.TempDir(), freeAddr(t)
	d := startDaemon(t, dir, listen)
	url := "http://" + listen + "/mcp"

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", url)
	cmd.Dir = tsclient
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	next := func(want string) tsLine {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("client ended before %q: %s", want, stderr.String())
		}
		var l tsLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.Event != want {
			t.Fatalf("client said %s, want %q (%s)", lines.Text(), want, stderr.String())
		}
		return l
	}

	next("ready")
	session := postChat(t, listen, "", "hello from the API")
	next("notification")
	var read readResult
	if err := json.Unmarshal(next("read").Result, &read); err != nil || len(read.Messages) != 1 || read.Messages[0].Content != "hello from the API" {
		t.Fatalf("TypeScript agent read %+v (%v)", read, err)
	}
	// An assistant message must not notify the subscribed agent.
	connectAgent(t, listen).call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "an answer"}, nil)
	_, _ = io.WriteString(stdin, "go\n")
	if done := next("done"); done.Notifications != 1 {
		t.Errorf("TypeScript agent got %d notifications, want 1 (no self-echo)", done.Notifications)
	}

	postChat(t, listen, session, "one")
	postChat(t, listen, session, "two")
	d.kill()
	startDaemon(t, dir, listen)
	reader := exec.CommandContext(ctx, node, "client.mjs", url, "read", read.LastID)
	reader.Dir = tsclient
	out, err := reader.Output()
	if err != nil {
		t.Fatalf("read after restart: %v: %s", err, out)
	}
	var l tsLine
	var rest readResult
	if json.Unmarshal(out, &l) != nil || json.Unmarshal(l.Result, &rest) != nil {
		t.Fatalf("read after restart said %s", out)
	}
	var got []string
	for _, m := range rest.Messages {
		got = append(got, m.Content)
	}
	if want := "an answer|one|two"; strings.Join(got, "|") != want {
		t.Errorf("after kill -9 and restart, the SDK read %q after the watermark, want exactly %q", got, want)
	}
}
