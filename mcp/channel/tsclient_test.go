package channel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/channel"
)

// TestServeChild is the channel process TestTypeScriptSDK's client starts:
// channel.Serve on its stdin and stdout, configured by PARLEY_CHANNEL_*.
func TestServeChild(t *testing.T) {
	url := os.Getenv("PARLEY_CHANNEL_URL")
	if url == "" {
		t.Skip("the channel process of TestTypeScriptSDK")
	}
	err := channel.Serve(context.Background(), channel.Options{URL: url, Session: core.SessionID(os.Getenv("PARLEY_CHANNEL_SESSION")),
		Resync: testResync, Settle: 10 * time.Millisecond, Logger: testLogger()}, os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// sdkModules is where the mcp package's TypeScript test client has the
// official SDK installed (make test-deps, or npm ci there).
var sdkModules = filepath.Join("..", "testdata", "tsclient", "node_modules")

// needSDK finds node and the SDK: without them the test is skipped, except
// on CI and under make test, where their absence is a failure.
func needSDK(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(sdkModules, "@modelcontextprotocol", "sdk", "package.json"))
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
	Event        string         `json:"event"`
	Message      string         `json:"message"`
	Experimental map[string]any `json:"experimental"`
	Instructions string         `json:"instructions"`
	Tools        []string       `json:"tools"`
	Params       map[string]any `json:"params"`
	Result       struct {
		IsError bool `json:"isError"`
	} `json:"result"`
}

// TestTypeScriptSDK plays Claude Code with the official TypeScript SDK, the
// one Claude Code builds on: it starts the channel as a subprocess over
// stdio, gets the person's message as notifications/claude/channel, relays
// a permission prompt whose approval comes back as the verdict, and
// replies.
func TestTypeScriptSDK(t *testing.T) {
	node := needSDK(t)
	modules, err := filepath.Abs(sdkModules)
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("typescript")
	d.human(id, "hello from the chat")

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join("testdata", "claude.mjs"), modules, os.Args[0], "-test.run=^TestServeChild$")
	cmd.Env = append(os.Environ(), "PARLEY_CHANNEL_URL="+d.url(), "PARLEY_CHANNEL_SESSION="+string(id))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	next := func(want string) tsLine {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the client ended before %q: %s", want, stderr.String())
		}
		var l tsLine
		if err := json.Unmarshal(lines.Bytes(), &l); err != nil || l.Event != want {
			t.Fatalf("the client said %s, want %q (%s)", lines.Text(), want, stderr.String())
		}
		return l
	}
	say := func(line string) {
		t.Helper()
		if _, err := io.WriteString(stdin, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}

	ready := next("ready")
	if _, ok := ready.Experimental["claude/channel/permission"]; !ok || len(ready.Tools) != 1 || ready.Tools[0] != channel.ReplyTool || ready.Instructions == "" {
		t.Fatalf("ready %+v", ready)
	}
	ev := next("channel")
	meta, _ := ev.Params["meta"].(map[string]any)
	if ev.Params["content"] != "hello from the chat" || meta["session_id"] != string(id) {
		t.Fatalf("event %+v", ev.Params)
	}

	say(`perm vwxyz Bash {"command":"rm -r build"}`)
	q := d.question(id)
	d.answer(id, q, 2) // deny and continue
	if v := next("verdict"); v.Params["request_id"] != "vwxyz" || v.Params["behavior"] != "deny" {
		t.Fatalf("verdict %+v", v.Params)
	}

	say("reply all done")
	if r := next("replied"); r.Result.IsError {
		t.Fatalf("reply failed: %+v", r)
	}
	ms := d.inbox(id)
	if last := ms[len(ms)-1]; last.Role != core.RoleAssistant || last.Content != "all done" {
		t.Fatalf("last message %+v", last)
	}
	d.human(id, "one more")
	if ev := next("channel"); ev.Params["content"] != "one more" {
		t.Fatalf("event %+v", ev.Params)
	}
	say("quit")
	next("closed")
}
