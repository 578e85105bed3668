package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// daemonProc is a `parley serve` child process (parleyBin), so that
// a test can kill it like kill -9 while the fakes and the real homeserver
// in the test process keep what they were sent.
type daemonProc struct {
	cmd *exec.Cmd
	log *servetest.Buffer
}

// startDaemon starts the child daemon with the data directory, listen
// address and extra environment (its configuration), and waits until it
// answers on /api/health.
func startDaemon(t *testing.T, dir, listen string, env ...string) *daemonProc {
	t.Helper()
	d := &daemonProc{log: &servetest.Buffer{}}
	d.cmd = exec.Command(parleyBin(t), "serve", "--data-dir", dir, "--listen", listen)
	d.cmd.Env = append(os.Environ(), env...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.kill)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon %d log:\n%s", d.cmd.Process.Pid, tail(d.log.String(), 40))
		}
	})
	healthy := func() bool {
		resp, err := http.Get("http://" + listen + "/api/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	servetest.PollUntil(t, 30*time.Second, "the daemon to start", healthy, func() string {
		if d.cmd.ProcessState != nil {
			return "it exited: " + d.log.String()
		}
		return ""
	})
	return d
}

// kill stops the daemon with SIGKILL: no shutdown, no drain, no Close.
func (d *daemonProc) kill() {
	if d.cmd.ProcessState == nil {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func postChat(t *testing.T, listen, session, text string) string {
	t.Helper()
	return postChatVia(t, http.DefaultClient, listen, session, text)
}

// postChatVia is postChat through client (a stack's on the fake clock).
func postChatVia(t *testing.T, client *http.Client, listen, session, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"session_id": session, "text": text})
	resp, err := client.Post("http://"+listen+"/api/chat", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		SessionID string `json:"session_id"`
		ID        string `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		t.Fatalf("POST /api/chat: %s", resp.Status)
	}
	return out.SessionID
}

// TestEndToEndAgentAndPeople runs the real daemon process: an agent
// subscribes over MCP, a message posted to the HTTP API notifies it, its own
// answer does not, and after kill -9 and a restart chat_read_since returns
// exactly the messages after its watermark.
func TestEndToEndAgentAndPeople(t *testing.T) {
	t.Parallel()
	dir, listen := t.TempDir(), freeAddr(t)
	d := startDaemon(t, dir, listen)
	a := subscribedAgent(t, listen)

	session := postChat(t, listen, "", "hello agent")
	select {
	case <-a.notes:
	case <-time.After(10 * time.Second):
		t.Fatal("no notification for the human message")
	}
	var first readResult
	a.call(t, "chat_read_since", map[string]any{}, &first)
	if len(first.Messages) != 1 || first.Messages[0].Content != "hello agent" {
		t.Fatalf("chat_read_since = %+v", first)
	}
	a.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": "hi, person"}, nil)
	select {
	case n := <-a.notes:
		t.Fatalf("notified of the agent's own message: %+v", n)
	case <-time.After(500 * time.Millisecond):
	}

	// Acknowledged by the API, then the daemon dies without warning.
	var want []string
	for i := range 5 {
		want = append(want, fmt.Sprintf("after the watermark %d", i))
		postChat(t, listen, session, want[i])
	}
	d.kill()
	startDaemon(t, dir, listen)
	a2 := connectAgent(t, listen)
	var rest readResult
	a2.call(t, "chat_read_since", map[string]any{"after_id": first.LastID}, &rest)
	var got []string
	for _, m := range rest.Messages {
		if m.Author == "user" {
			got = append(got, m.Content)
		}
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("after restart, human messages after the watermark = %q, want exactly %q", got, want)
	}
	if len(rest.Messages) != 6 || rest.Messages[0].Content != "hi, person" {
		t.Errorf("want the assistant message then the 5 human ones, got %+v", rest.Messages)
	}
}
