package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// tsEvent is one line the TypeScript client prints.
type tsEvent struct {
	Event           string          `json:"event"`
	Message         string          `json:"message"`
	ProtocolVersion string          `json:"protocolVersion"`
	Params          update          `json:"params"`
	Raw             update          `json:"raw"`
	Result          InboxPage       `json:"result"`
	Structured      json.RawMessage `json:"structured"`
	Notifications   int             `json:"notifications"`
}

// needTool finds a program the test needs: without it the test is skipped,
// except on CI and under make test, where its absence is a failure.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
			t.Fatalf("%s is not installed", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return path
}

// TestTypeScriptSDK runs the agent's loop with a real third-party client,
// the official TypeScript SDK (testdata/tsclient/client.mjs): subscribe, a
// person writes, the notification arrives, chat_read_since reads it; an
// assistant message notifies nobody.
func TestTypeScriptSDK(t *testing.T) {
	node := needTool(t, "node")
	dir := filepath.Join("testdata", "tsclient")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		npm := needTool(t, "npm")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}

	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("typescript")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", st.url)
	cmd.Dir = dir
	var stderr bytes.Buffer
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
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	next := func(want string) tsEvent {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("the TypeScript client ended before %q: %v\nstderr:\n%s", want, lines.Err(), stderr.String())
		}
		var ev tsEvent
		if err := json.Unmarshal(lines.Bytes(), &ev); err != nil {
			t.Fatalf("bad line %q: %v", lines.Text(), err)
		}
		if ev.Event != want {
			t.Fatalf("TypeScript client: %s %s, want %q\nstderr:\n%s", ev.Event, ev.Message, want, stderr.String())
		}
		return ev
	}

	if ev := next("ready"); ev.ProtocolVersion != "2025-11-25" {
		t.Fatalf("negotiated %q", ev.ProtocolVersion)
	}
	m := st.human(id, "hello TypeScript")
	ev := next("notification")
	if ev.Params.URI != InboxURI || len(ev.Raw.Messages) != 1 || ev.Raw.Messages[0].ID != m.ID || ev.Raw.Messages[0].Content != "hello TypeScript" {
		t.Fatalf("notification %+v", ev)
	}
	ev = next("read")
	if len(ev.Result.Messages) != 1 || ev.Result.Messages[0].ID != m.ID || ev.Result.LastID != m.ID || len(ev.Structured) == 0 {
		t.Fatalf("chat_read_since %+v", ev)
	}
	st.assistant(id, "an assistant reply")
	if _, err := stdin.Write([]byte("posted\n")); err != nil {
		t.Fatal(err)
	}
	if ev := next("done"); ev.Notifications != 1 {
		t.Fatalf("the TypeScript client saw %d notifications, want exactly 1", ev.Notifications)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("node: %v\nstderr:\n%s", err, stderr.String())
	}
}
