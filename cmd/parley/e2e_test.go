package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// TestDaemonChild is the daemon process of the end-to-end test; it runs
// `parley serve` until it is killed.
func TestDaemonChild(t *testing.T) {
	dir, listen := os.Getenv("PARLEY_E2E_DIR"), os.Getenv("PARLEY_E2E_LISTEN")
	if dir == "" {
		t.Skip("the daemon process of TestEndToEndAgentAndPeople")
	}
	os.Exit(Run(context.Background(), []string{"serve", "--data-dir", dir, "--listen", listen}, os.Environ(), nil, os.Stdout, os.Stderr))
}

type daemonProc struct {
	t      *testing.T
	dir    string
	listen string
	cmd    *exec.Cmd
	log    bytes.Buffer
}

func startDaemon(t *testing.T, dir, listen string) *daemonProc {
	t.Helper()
	p := &daemonProc{t: t, dir: dir, listen: listen}
	p.cmd = exec.Command(os.Args[0], "-test.run=^TestDaemonChild$")
	p.cmd.Env = append(os.Environ(), "PARLEY_E2E_DIR="+dir, "PARLEY_E2E_LISTEN="+listen)
	p.cmd.Stdout, p.cmd.Stderr = &p.log, &p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill() })
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + listen + "/api/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon not up: %v\n%s", err, p.log.String())
		}
		time.Sleep(20 * time.Millisecond) // polling a process that is starting
	}
}

// kill stops the daemon like kill -9: no shutdown, no Close.
func (p *daemonProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
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

type agent struct {
	*client.Client
	notes chan mcpgo.JSONRPCNotification
}

func connectAgent(t *testing.T, listen string) *agent {
	t.Helper()
	tr, err := transport.NewStreamableHTTP("http://"+listen+"/mcp", transport.WithContinuousListening())
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{Client: client.NewClient(tr), notes: make(chan mcpgo.JSONRPCNotification, 100)}
	a.OnNotification(func(n mcpgo.JSONRPCNotification) {
		if n.Method == mcpgo.MethodNotificationResourceUpdated {
			a.notes <- n
		}
	})
	if err := a.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{ClientInfo: mcpgo.Implementation{Name: "e2e", Version: "1"}}}); err != nil {
		t.Fatal(err)
	}
	return a
}

type readResult struct {
	LastID   string `json:"last_id"`
	Messages []struct {
		ID        string `json:"id"`
		SessionID string `json:"session_id"`
		Author    string `json:"author"`
		Content   string `json:"content"`
	} `json:"messages"`
}

func (a *agent) call(t *testing.T, tool string, args map[string]any, out any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := a.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		t.Fatalf("%s: %s", tool, text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			t.Fatalf("%s: %v in %s", tool, err, text)
		}
	}
}

func postChat(t *testing.T, listen, session, text string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"session_id": session, "text": text})
	resp, err := http.Post("http://"+listen+"/api/chat", "application/json", bytes.NewReader(body))
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
	a := connectAgent(t, listen)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
		t.Fatal(err)
	}

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
