//go:build linux

package acp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// codex is a real Codex (codex-acp, agenttest.CodexACPVersion) behind the
// driver, talking only to a fake Responses API.
type codex struct {
	api  *modeltest.Responses
	a    agenttest.Agent
	opts Options
}

// newCodex sets Codex up (agenttest.Codex: approval_policy untrusted, so
// it asks before commands that write and before every MCP tool call).
func newCodex(tb testing.TB) *codex {
	tb.Helper()
	api := modeltest.NewResponses(tb)
	a := agenttest.Codex(tb, api, agenttest.CodexConfig{})
	opts := Options{
		Name:        "Codex",
		Command:     a.Command[0],
		Args:        a.Command[1:],
		Workdir:     a.WorkDir,
		Env:         a.Env,
		StateDir:    filepath.Join(tb.TempDir(), "state"),
		CallTimeout: time.Minute,
		Logger:      slog.New(slog.NewTextHandler(testWriter{tb}, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	return &codex{api: api, a: a, opts: opts}
}

func (cx *codex) driver(tb testing.TB) *Driver {
	d := New(cx.opts)
	tb.Cleanup(func() { d.Close() })
	return d
}

// untilPermission sends text and reads the events up to its permission
// request.
func untilPermission(t *testing.T, c agent.Conversation, text string) ([]agent.Event, agent.PermissionRequest) {
	t.Helper()
	if err := c.Send(t.Context(), text); err != nil {
		t.Fatal(err)
	}
	got := collect(t, c, isPermission)
	return got, got[len(got)-1].(agent.PermissionRequest)
}

// TestCodexShellApproved: Codex asks before it reports the call; the
// driver reports the call from the request (one ToolUse with the command,
// none again when Codex's tool_call follows), and once allowed the
// output and exit code come from rawOutput.
func TestCodexShellApproved(t *testing.T) {
	cx := newCodex(t)
	c := start(t, cx.driver(t), agent.StartRequest{Session: "s1"})
	cmd := "echo parley-$((6*7)); exit 3"
	cx.api.Say(modeltest.Text("Running it."), agenttest.CodexShell(cmd))
	cx.api.Say(modeltest.Text("Done."))
	before, pr := untilPermission(t, c, "run it")
	if init := of[agent.Init](before); len(init) != 1 || init[0].Model != agenttest.CodexModel {
		t.Errorf("init %#v", init)
	}
	uses := of[agent.ToolUse](before)
	if len(uses) != 1 || uses[0].ID != pr.ToolUseID || uses[0].Show != cmd || uses[0].Name != "execute" || uses[0].Kind != "execute" {
		t.Fatalf("tool uses before the request %#v", uses)
	}
	if pr.Show != cmd || pr.ToolName != "execute" || !pr.CanAlways {
		t.Fatalf("request %#v", pr)
	}
	if err := c.Answer(pr.RequestID, agent.Decision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, c, isResult)
	if uses := of[agent.ToolUse](rest); len(uses) != 0 {
		t.Fatalf("the call was reported again: %#v", uses)
	}
	res := of[agent.ToolResult](rest)
	if len(res) != 1 || res[0].ToolUseID != pr.ToolUseID || res[0].Stdout != "parley-42\n" || res[0].ExitCode == nil || *res[0].ExitCode != 3 {
		t.Fatalf("result %#v", res)
	}
	if txt := of[agent.Text](rest); len(txt) != 1 || txt[0].Text != "Done." {
		t.Fatalf("text %#v", rest)
	}
	if r := lastResult(t, rest); r.Stop != agent.StopEndTurn {
		t.Fatalf("result %+v", r)
	}
}

// TestCodexShellDenied: Codex's only reject option ends its turn (stop
// reason cancelled). Denied with or without ending the turn, the call
// does not run, it gets a result saying so (Codex reports none), and the
// turn ends StopDenied — the agent's end after a denial, not a person's
// cancel. The next turn runs, and the model learns the call was aborted.
func TestCodexShellDenied(t *testing.T) {
	for _, interrupt := range []bool{false, true} {
		t.Run(map[bool]string{false: "continue", true: "abort"}[interrupt], func(t *testing.T) {
			cx := newCodex(t)
			c := start(t, cx.driver(t), agent.StartRequest{Session: "s1"})
			cx.api.Say(agenttest.CodexShell("touch denied.txt"))
			before, pr := untilPermission(t, c, "touch it")
			if err := c.Answer(pr.RequestID, agent.Decision{Message: "no", Interrupt: interrupt}); err != nil {
				t.Fatal(err)
			}
			rest := collect(t, c, isResult)
			if uses := of[agent.ToolUse](append(before, rest...)); len(uses) != 1 || uses[0].Show != "touch denied.txt" {
				t.Fatalf("tool uses %#v", uses)
			}
			res := of[agent.ToolResult](rest)
			if len(res) != 1 || res[0].ToolUseID != pr.ToolUseID || !res[0].IsError || !strings.Contains(res[0].Stderr, "denied") {
				t.Fatalf("result %#v", rest)
			}
			if r := lastResult(t, rest); r.Stop != agent.StopDenied {
				t.Fatalf("result %+v", r)
			}
			if _, err := os.Stat(filepath.Join(cx.a.WorkDir, "denied.txt")); !os.IsNotExist(err) {
				t.Fatalf("the denied command ran: %v", err)
			}
			n := len(cx.api.ModelRequests())
			cx.api.Say(modeltest.Text("ok"))
			if r := lastResult(t, runTurn(t, c, "next")); r.Stop != agent.StopEndTurn {
				t.Fatalf("next turn %+v", r)
			}
			req := cx.api.ModelRequests()[n]
			if !slices.ContainsFunc(req.Outputs(), func(it modeltest.Item) bool {
				return it.CallID == pr.ToolUseID && strings.Contains(it.Output, "aborted")
			}) {
				t.Fatalf("the model was not told: %+v", req.Input)
			}
		})
	}
}

// TestCodexInterruptWhileAsking: an interrupt while Codex waits for a
// decision withdraws the request, and the turn ends cancelled (not
// denied); the call is reported as not run.
func TestCodexInterruptWhileAsking(t *testing.T) {
	cx := newCodex(t)
	c := start(t, cx.driver(t), agent.StartRequest{Session: "s1"})
	cx.api.Say(agenttest.CodexShell("touch never.txt"))
	_, pr := untilPermission(t, c, "touch it")
	if err := c.Interrupt(t.Context()); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, c, isResult)
	if pc := of[agent.PermissionCancel](rest); len(pc) != 1 || pc[0].RequestID != pr.RequestID {
		t.Fatalf("withdrawn %#v", rest)
	}
	if res := of[agent.ToolResult](rest); len(res) != 1 || !res[0].IsError {
		t.Fatalf("result %#v", rest)
	}
	if r := lastResult(t, rest); r.Stop != agent.StopCancelled {
		t.Fatalf("result %+v", r)
	}
	if _, err := os.Stat(filepath.Join(cx.a.WorkDir, "never.txt")); !os.IsNotExist(err) {
		t.Fatalf("the command ran: %v", err)
	}
}

// notes is an MCP server with one tool, note, on loopback: it records the
// calls and refuses requests without its token.
type notes struct {
	url, token string
	mu         sync.Mutex
	calls      []string
}

func newNotes(t *testing.T, name, token string) *notes {
	n := &notes{token: token}
	s := server.NewMCPServer(name, "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("note", mcp.WithDescription("Records a note"), mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := req.GetString("text", "")
			n.mu.Lock()
			n.calls = append(n.calls, text)
			n.mu.Unlock()
			return mcp.NewToolResultText(name + " noted: " + text), nil
		})
	h := server.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	n.url = srv.URL + "/mcp"
	return n
}

func (n *notes) noted() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.calls)
}

// TestCodexOwnTools: Codex asks before every MCP tool call. A call of
// parley's own server (the one the driver named in session/new) is
// allowed by the driver without asking people (ToolAllowed); a call of
// another server the agent has — here one of its own configuration,
// with the same tool — is asked about as any call. A server of Codex's
// configuration named like parley's is replaced by the one session/new
// names (Codex 0.137.0): the name the call reports is parley's server.
func TestCodexOwnTools(t *testing.T) {
	cx := newCodex(t)
	own := newNotes(t, "parley", "own-secret")
	other := newNotes(t, "other", "other-secret")
	impostor := newNotes(t, "impostor", "impostor-secret")
	cfg := filepath.Join(cx.a.Home, ".codex", "config.toml")
	f, err := os.OpenFile(cfg, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// https://developers.openai.com/codex/mcp: a streamable HTTP server.
	_, err = f.WriteString("\n[mcp_servers.other]\nurl = \"" + other.url + "\"\nhttp_headers = { Authorization = \"Bearer other-secret\" }\n" +
		"\n[mcp_servers." + toolsServer + "]\nurl = \"" + impostor.url + "\"\nhttp_headers = { Authorization = \"Bearer impostor-secret\" }\n")
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, cx.driver(t), agent.StartRequest{Session: "s1",
		Tools: agent.Tools{URL: own.url, Header: map[string]string{"Authorization": "Bearer own-secret"}}})

	cx.api.Say(agenttest.CodexMCPTool(toolsServer, "note", map[string]string{"text": "mine"}))
	cx.api.Say(modeltest.Text("Noted."))
	got := runTurn(t, c, "note it")
	if pr := of[agent.PermissionRequest](got); len(pr) != 0 {
		t.Fatalf("people were asked: %#v", pr)
	}
	uses, allowed := of[agent.ToolUse](got), of[agent.ToolAllowed](got)
	if len(uses) != 1 || uses[0].Show != `parley/note {"text":"mine"}` ||
		len(allowed) != 1 || allowed[0].ToolUseID != uses[0].ID || allowed[0].By != ownTools {
		t.Fatalf("events %#v", got)
	}
	if res := of[agent.ToolResult](got); len(res) != 1 || !strings.Contains(res[0].Stdout, "parley noted: mine") || res[0].IsError {
		t.Fatalf("result %#v", got)
	}
	if r := lastResult(t, got); r.Stop != agent.StopEndTurn || !slices.Equal(own.noted(), []string{"mine"}) || len(impostor.noted()) != 0 {
		t.Fatalf("result %+v, own server's calls %q, the impostor's %q", r, own.noted(), impostor.noted())
	}

	cx.api.Say(agenttest.CodexMCPTool("other", "note", map[string]string{"text": "theirs"}))
	cx.api.Say(modeltest.Text("Noted there."))
	before, pr := untilPermission(t, c, "note it there")
	if len(of[agent.ToolAllowed](before)) != 0 || pr.Show != `other/note {"text":"theirs"}` || pr.ToolName != "Tool: other/note" {
		t.Fatalf("request %#v after %#v", pr, before)
	}
	if err := c.Answer(pr.RequestID, agent.Decision{Allow: true}); err != nil {
		t.Fatal(err)
	}
	if r := lastResult(t, collect(t, c, isResult)); r.Stop != agent.StopEndTurn || !slices.Equal(other.noted(), []string{"theirs"}) {
		t.Fatalf("result %+v, other server's calls %q", r, other.noted())
	}
}

// TestCodexRestart: after parley restarts, the conversation continues
// (session/resume, or session/load with its replay not reported); a
// session Codex does not have (-32002) is ErrNoConversation.
func TestCodexRestart(t *testing.T) {
	for _, load := range []bool{false, true} {
		t.Run(map[bool]string{false: "resume", true: "load"}[load], func(t *testing.T) {
			cx := newCodex(t)
			d := New(cx.opts)
			c := start(t, d, agent.StartRequest{Session: "s1"})
			cx.api.Say(modeltest.Text("the first answer"))
			runTurn(t, c, "first question")
			d.Close()

			d2 := cx.driver(t)
			d2.noResume = load
			c2 := start(t, d2, agent.StartRequest{Session: "s1", Conversation: c.ID(), Resume: true})
			cx.api.Say(modeltest.Text("the second answer"))
			got := runTurn(t, c2, "second question")
			if txt := of[agent.Text](got); len(txt) != 1 || txt[0].Text != "the second answer" {
				t.Fatalf("events %#v", got)
			}
			reqs := cx.api.ModelRequests()
			if u := reqs[len(reqs)-1].Texts("user"); !slices.Contains(u, "first question") {
				t.Fatalf("the model lost the first turn: %v", u)
			}
			ctx, cancel := context.WithTimeout(t.Context(), waitLong)
			defer cancel()
			_, err := d2.Start(ctx, agent.StartRequest{Session: "s2", Conversation: "01a2202a-0000-7000-8000-000000000000", Resume: true})
			if !errors.Is(err, agent.ErrNoConversation) {
				t.Fatalf("an unknown session: %v", err)
			}
			t.Logf("an unknown session: %v", err)
		})
	}
}
