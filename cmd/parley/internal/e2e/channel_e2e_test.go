package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/mcp/channel"
)

// channelProc is a `parley mcp --channel` process and the MCP client that
// plays Claude Code on its stdin and stdout.
type channelProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr servetest.Buffer
	c      *client.Client
	events chan string
	perms  chan string
}

func startChannel(t *testing.T, args ...string) *channelProc {
	t.Helper()
	p := &channelProc{t: t, events: make(chan string, 64), perms: make(chan string, 8)}
	p.cmd = exec.Command(parleyBin(t), append([]string{"mcp", "--channel"}, args...)...)
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	p.c = client.NewClient(transport.NewIO(stdout, stdin, io.NopCloser(strings.NewReader(""))))
	p.c.OnNotification(func(n mcpgo.JSONRPCNotification) {
		switch n.Method {
		case channel.MethodChannel:
			content, _ := n.Params.AdditionalFields["content"].(string)
			p.events <- content
		case channel.MethodPermission:
			b, _ := json.Marshal(n.Params.AdditionalFields)
			p.perms <- string(b)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	caps := mcpgo.ClientCapabilities{Elicitation: &mcpgo.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}
	res, err := p.c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{Capabilities: caps,
		ClientInfo: mcpgo.Implementation{Name: "claude-code", Title: "Claude Code", Version: "2.1.328"}}})
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, p.stderr.String())
	}
	if _, ok := res.Capabilities.Experimental["claude/channel"]; !ok || p.c.ProtocolVersion() != mcpgo.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Fatalf("a channel Claude Code would not register: %s, %+v", p.c.ProtocolVersion(), res.Capabilities)
	}
	if _, err := p.c.ListTools(ctx, mcpgo.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	return p
}

// kill stops the channel like kill -9.
func (p *channelProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
	_ = p.c.Close()
}

var sessionLine = regexp.MustCompile(`parley mcp --channel: session (\S+)`)

func (p *channelProc) session() string {
	p.t.Helper()
	var id string
	servetest.PollUntil(p.t, 20*time.Second, "the channel's session line on stderr", func() bool {
		m := sessionLine.FindStringSubmatch(p.stderr.String())
		if m != nil {
			id = m[1]
		}
		return m != nil
	}, nil)
	return id
}

// expect waits for exactly these events, in order, and then for quiet.
func (p *channelProc) expect(contents ...string) {
	p.t.Helper()
	for _, want := range contents {
		select {
		case got := <-p.events:
			if got != want {
				p.t.Fatalf("event %q, want %q", got, want)
			}
		case <-time.After(20 * time.Second):
			p.t.Fatalf("no event %q\n%s", want, p.stderr.String())
		}
	}
	select {
	case got := <-p.events:
		p.t.Fatalf("unexpected event %q", got)
	case <-time.After(time.Second):
	}
}

func (p *channelProc) call(tool string, args map[string]any) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	res, err := p.c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		p.t.Fatal(err)
	}
	text := res.Content[0].(mcpgo.TextContent).Text
	if res.IsError {
		p.t.Fatalf("%s: %s", tool, text)
	}
	return text
}

// TestChannelEndToEnd runs `parley serve` and `parley mcp --channel` as
// processes, the channel driven over its stdio by a client that declares
// what Claude Code declares: a session created with --title, a message
// pushed once; the channel killed with -9 and started again with
// --session: only the messages written meanwhile; the daemon killed with -9
// and restarted: the next message once; a permission prompt approved by a
// person's answer in the chat; the reply in the session.
func TestChannelEndToEnd(t *testing.T) {
	t.Parallel()
	dir, listen := t.TempDir(), freeAddr(t)
	d := startDaemon(t, dir, listen)
	url := "http://" + listen + "/mcp"

	ch := startChannel(t, "--url", url, "--title", "from the terminal")
	id := ch.session()
	postChat(t, listen, id, "one")
	ch.expect("one")
	// The watermark is kept once "one" is pushed; kill -9 after that.
	agent := connectAgent(t, listen)
	servetest.PollUntil(t, 20*time.Second, "the channel's watermark", func() bool {
		var st struct {
			Value string `json:"value"`
		}
		agent.call(t, "agent.state", map[string]any{"key": channel.StateKey, "session_id": id}, &st)
		var kept struct {
			Watermark string `json:"watermark"`
		}
		return json.Unmarshal([]byte(st.Value), &kept) == nil && kept.Watermark != ""
	}, nil)
	ch.kill()

	postChat(t, listen, id, "two")
	postChat(t, listen, id, "three")
	ch = startChannel(t, "--url", url, "--session", id)
	ch.expect("two", "three")

	d.kill()
	startDaemon(t, dir, listen)
	postChat(t, listen, id, "four")
	ch.expect("four")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ch.c.GetTransport().SendNotification(ctx, mcpgo.JSONRPCNotification{JSONRPC: mcpgo.JSONRPC_VERSION,
		Notification: mcpgo.Notification{Method: channel.MethodPermissionRequest, Params: mcpgo.NotificationParams{
			AdditionalFields: map[string]any{"request_id": "abcde", "tool_name": "Bash", "description": "Create f", "input_preview": `{"command":"touch f"}`}}}}); err != nil {
		t.Fatal(err)
	}
	agent = connectAgent(t, listen)
	servetest.PollUntil(t, 20*time.Second, "the approval question", func() bool {
		var list struct {
			Sessions []struct {
				ID            string `json:"id"`
				OpenQuestions int    `json:"open_questions"`
			} `json:"sessions"`
		}
		agent.call(t, "session.list", map[string]any{}, &list)
		for _, s := range list.Sessions {
			if s.ID == id && s.OpenQuestions > 0 {
				return true
			}
		}
		return false
	}, nil)
	// The person picks Approve on the page (a typed "1" would be a
	// message: approvals are answered only by a choice naming them).
	qs := sessionQuestions(t, "http://"+listen, id)
	if len(qs) != 1 {
		t.Fatalf("open questions %q", qs)
	}
	body, _ := json.Marshal(map[string]any{"question_id": qs[0], "option": 1})
	resp, err := http.Post("http://"+listen+"/api/sessions/"+id+"/answer", "application/json", bytes.NewReader(body))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("answer from the page: %v %v", err, resp)
	}
	resp.Body.Close()
	select {
	case v := <-ch.perms:
		if v != `{"behavior":"allow","request_id":"abcde"}` {
			t.Fatalf("verdict %s", v)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no verdict\n%s", ch.stderr.String())
	}

	if text := ch.call(channel.ReplyTool, map[string]any{"text": "done: f created"}); !strings.HasPrefix(text, "sent") {
		t.Fatalf("reply: %s", text)
	}
	var read readResult
	agent.call(t, "chat_read_since", map[string]any{"session_id": id, "author": "assistant"}, &read)
	if n := len(read.Messages); n == 0 || read.Messages[n-1].Content != "done: f created" {
		t.Fatalf("assistant messages %+v", read.Messages)
	}
	ch.expect() // the answer was relayed as the verdict, not pushed
}
