package agenttest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// probeToken is the credential the probe MCP server wants on every
// request, as the agent was told to send it in session/new.
const probeToken = "Bearer probe-secret"

// probe is a tiny MCP server (Streamable HTTP, mcp-go) with one tool,
// note, that records its calls: the preflight tests hand it to the agent
// in session/new, the fake model calls the tool, and the call arriving
// here shows the agent took the server and its header.
type probe struct {
	URL string

	mu      sync.Mutex
	calls   []string // the text of each note call
	refused int      // requests without the header
	changed chan struct{}
}

func newProbe(t *testing.T) *probe {
	p := &probe{changed: make(chan struct{})}
	s := server.NewMCPServer("probe", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("note", mcp.WithDescription("Records a note"), mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text := req.GetString("text", "")
			p.mu.Lock()
			p.calls = append(p.calls, text)
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
			return mcp.NewToolResultText("noted: " + text), nil
		})
	h := server.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != probeToken {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			http.Error(w, "no credential", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	p.URL = srv.URL + "/mcp"
	return p
}

// server is the probe as an ACP McpServer of session/new (the http
// transport, https://agentclientprotocol.com/protocol/session-setup).
func (p *probe) server() map[string]any {
	return map[string]any{"type": "http", "name": "probe", "url": p.URL,
		"headers": []map[string]string{{"name": "Authorization", "value": probeToken}}}
}

// waitCall waits until the tool was called n times and returns the calls.
func (p *probe) waitCall(t *testing.T, n int) []string {
	t.Helper()
	for {
		p.mu.Lock()
		calls, ch := append([]string(nil), p.calls...), p.changed
		p.mu.Unlock()
		if len(calls) >= n {
			return calls
		}
		select {
		case <-ch:
		case <-time.After(wait):
			t.Fatalf("probe: %d of %d calls", len(calls), n)
		}
	}
}

func (p *probe) refusals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}
