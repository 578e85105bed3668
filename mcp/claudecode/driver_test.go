package claudecode

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// Why a turn ended, as Claude Code's result line says it, for the
// orchestrator.
func TestStopReason(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want agent.StopReason
	}{
		{Result{Subtype: "success", TerminalReason: "completed", StopReason: "end_turn"}, agent.StopEndTurn},
		{Result{Subtype: "error_during_execution", IsError: true, TerminalReason: "aborted_streaming"}, agent.StopCancelled},
		{Result{Subtype: "error_during_execution", IsError: true, TerminalReason: "aborted_tools", StopReason: "tool_use"}, agent.StopDenied},
		{Result{Subtype: "error_max_turns", IsError: true}, agent.StopMaxTurns},
		{Result{Subtype: "success", StopReason: "refusal"}, agent.StopRefusal},
		{Result{Subtype: "success", StopReason: "max_tokens"}, agent.StopMaxTokens},
		{Result{Subtype: "success", IsError: true, TerminalReason: "api_error", Text: "API Error: 500"}, agent.StopError},
		{Result{Subtype: "success"}, agent.StopEndTurn},
	} {
		if got := stopReason(tc.r); got != tc.want {
			t.Errorf("stopReason(%+v) = %s, want %s", tc.r, got, tc.want)
		}
	}
	r := toAgent(Result{Subtype: "error_during_execution", IsError: true, Errors: []string{"[ede_diagnostic] x"}}).(agent.Result)
	if !slices.Equal(r.Errors, []string{"error_during_execution", "[ede_diagnostic] x"}) {
		t.Errorf("an error's Errors %q: want its subtype first", r.Errors)
	}
	if r := toAgent(Result{Subtype: "success", Text: "hi", Origin: "task-notification"}).(agent.Result); r.Errors != nil || r.Origin != "task-notification" || r.Text != "hi" {
		t.Errorf("a result of Claude Code's own: %+v", r)
	}
}

// The MCP configuration names parley's server "parley": Streamable HTTP
// with the credential's headers, or the stdio proxy with its environment.
func TestMCPConfig(t *testing.T) {
	b, err := mcpConfig(agent.Tools{URL: "http://127.0.0.1:8765/mcp", Header: map[string]string{"Parley-Agent-Token": "t0k"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"mcpServers":{"parley":{"headers":{"Parley-Agent-Token":"t0k"},"type":"http","url":"http://127.0.0.1:8765/mcp"}}}` {
		t.Errorf("http: %s", b)
	}
	b, _ = mcpConfig(agent.Tools{Stdio: []string{"/usr/bin/parley", "mcp", "--session", "S1"}, StdioEnv: []string{"PARLEY_AGENT_TOKEN=t0k"}})
	if string(b) != `{"mcpServers":{"parley":{"args":["mcp","--session","S1"],"command":"/usr/bin/parley","env":{"PARLEY_AGENT_TOKEN":"t0k"},"type":"stdio"}}}` {
		t.Errorf("stdio: %s", b)
	}
	if b, _ := mcpConfig(agent.Tools{}); b != nil {
		t.Errorf("no tools: %s", b)
	}
}

func TestNewConversation(t *testing.T) {
	d := NewDriver(nil)
	u := d.NewConversation()
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(u) || u == d.NewConversation() {
		t.Fatalf("uuid %s", u)
	}
}

// noteServer is an MCP server with one tool, note, recording what it was
// called with and the credential the call carried.
type noteServer struct {
	mu     sync.Mutex
	notes  []string
	tokens []string
}

func (s *noteServer) handler() http.Handler {
	m := server.NewMCPServer("parley-test", "1")
	m.AddTool(mcp.NewTool("note", mcp.WithString("text", mcp.Required())), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.notes = append(s.notes, req.GetString("text", ""))
		return mcp.NewToolResultText("noted"), nil
	})
	h := server.NewStreamableHTTPServer(m)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.tokens = append(s.tokens, r.Header.Get("Parley-Agent-Token"))
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// TestDriverGivesTools: Claude Code started with StartRequest.Tools
// reaches that MCP server with the credential's header and calls its
// tools without asking anyone (permission prompts are on); the
// configuration is a file only parley's user reads, gone with the
// process.
func TestDriverGivesTools(t *testing.T) {
	h := newHarness(t, true)
	ts := &noteServer{}
	srv := httptest.NewServer(ts.handler())
	defer srv.Close()
	h.api.Say(claudetest.Tool("mcp__parley__note", map[string]string{"text": "from the model"}))
	h.api.Say(claudetest.Text("Noted."))

	d := NewDriver(h.runner)
	ctx, cancel := context.WithTimeout(t.Context(), turnTimeout)
	defer cancel()
	c, err := d.Start(ctx, agent.StartRequest{Session: "s1", Conversation: d.NewConversation(),
		Tools: agent.Tools{URL: srv.URL, Header: map[string]string{"Parley-Agent-Token": "t0k3n"}}})
	if err != nil {
		t.Fatal(err)
	}
	p := c.(*conversation).p
	st, err := os.Stat(p.mcpConfigPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the MCP configuration: %v, mode %v", err, st.Mode())
	}
	if err := c.Send(ctx, "note something"); err != nil {
		t.Fatal(err)
	}
	var events []agent.Event
	for ev := range c.Events() {
		events = append(events, ev)
		if _, ok := ev.(agent.PermissionRequest); ok {
			t.Fatalf("parley's own tool asked for permission: %+v", ev)
		}
		if _, ok := ev.(agent.Result); ok {
			break
		}
	}
	b, _ := json.Marshal(events)
	ts.mu.Lock()
	notes, tokens := slices.Clone(ts.notes), slices.Clone(ts.tokens)
	ts.mu.Unlock()
	if !slices.Equal(notes, []string{"from the model"}) {
		t.Fatalf("the tool was called with %q; events %s", notes, b)
	}
	for _, tok := range tokens {
		if tok != "t0k3n" {
			t.Fatalf("a request carried the credential %q", tok)
		}
	}
	if r := events[len(events)-1].(agent.Result); r.Stop != agent.StopEndTurn || r.Text != "Noted." {
		t.Fatalf("result %+v", r)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p.mcpConfigPath()); !os.IsNotExist(err) {
		t.Fatalf("the MCP configuration is left after Stop: %v", err)
	}
}
