package e2e

// The test agent: an MCP client of parley, as Claude Code or any other
// agent connects, shared by the in-process stacks (harness_test.go) and the
// tests of a child daemon.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
)

// agent is an MCP client of parley, as an agent connects.
type agent struct {
	*client.Client
	notes chan mcpgo.JSONRPCNotification
}

// connectAgent connects an agent to parley at listen and initializes the
// session; it is closed when the test ends.
func connectAgent(t *testing.T, listen string) *agent {
	t.Helper()
	return connectAgentVia(t, http.DefaultClient, listen)
}

// connectAgentVia is connectAgent through client (a stack's on an
// in-memory network).
func connectAgentVia(t *testing.T, hc *http.Client, listen string) *agent {
	t.Helper()
	tr, err := transport.NewStreamableHTTP("http://"+listen+"/mcp", transport.WithContinuousListening(), transport.WithHTTPBasicClient(hc))
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

// subscribedAgent connects an agent to parley at addr, subscribed to the
// inbox: it is notified of every person's message.
func subscribedAgent(t *testing.T, addr string) *agent {
	t.Helper()
	return subscribedAgentVia(t, http.DefaultClient, addr)
}

// subscribedAgentVia is subscribedAgent through client.
func subscribedAgentVia(t *testing.T, client *http.Client, addr string) *agent {
	t.Helper()
	a := connectAgentVia(t, client, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
		t.Fatal(err)
	}
	return a
}

// readResult is what chat_read_since returns.
type readResult struct {
	LastID   string `json:"last_id"`
	Messages []struct {
		ID        string `json:"id"`
		SessionID string `json:"session_id"`
		Author    string `json:"author"`
		Content   string `json:"content"`
	} `json:"messages"`
}

// said counts the people's messages in r by their text.
func (r readResult) said() map[string]int {
	count := map[string]int{}
	for _, m := range r.Messages {
		if m.Author == "user" {
			count[m.Content]++
		}
	}
	return count
}

// blockingCall is the deadline of a call that waits for people
// (ui.request_approval, ui.ask): the question stays open for the tool's
// default timeout_s, 300 s, whatever else the test does meanwhile, and a
// test waits for the decision itself (awaitDecision). A shorter deadline
// made the premise "the test reaches its decision within a minute", which
// a loaded machine broke (TestMatrixApprovalOnItsQuestion, 3 of 5 runs).
const blockingCall = 6 * time.Minute

// call calls tool with args and decodes its text into out (if set); a
// failure ends the test.
func (a *agent) call(t *testing.T, tool string, args map[string]any, out any) {
	t.Helper()
	if err := a.callErr(10*time.Second, tool, args, out); err != nil {
		t.Fatal(err)
	}
}

// callErr is call for goroutines other than the test's, with a deadline
// of its own: it returns the tool's failure instead of ending the test.
func (a *agent) callErr(timeout time.Duration, tool string, args map[string]any, out any) error {
	text, isErr, err := a.callText(timeout, tool, args)
	if err != nil {
		return fmt.Errorf("%s: %v", tool, err)
	}
	if isErr {
		return fmt.Errorf("%s: %s", tool, text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			return fmt.Errorf("%s: %v in %s", tool, err, text)
		}
	}
	return nil
}

// callText calls tool within timeout and returns its text, whether it is
// an error result, and the call's own failure (no answer).
func (a *agent) callText(timeout time.Duration, tool string, args map[string]any) (string, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := a.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		return "", true, err
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			text += tc.Text
		}
	}
	return text, res.IsError, nil
}
