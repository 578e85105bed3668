package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/core"
)

// initWith initializes an MCP session with ?query and headers and returns
// its id.
func (p *pipeStack) initWith(t *testing.T, query string, headers map[string]string) string {
	t.Helper()
	code, sid, body := p.postWith(t, query, headers, "", initLine)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize ?%s %v: %d %q %s", query, headers, code, sid, body)
	}
	p.postWith(t, query, headers, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid
}

// refused checks a 403 with a JSON-RPC error answering request id.
func refused(t *testing.T, what string, code int, body string, id int) {
	t.Helper()
	var reply struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &reply); err != nil {
		t.Fatalf("%s: %d, not JSON-RPC: %s", what, code, body)
	}
	if code != http.StatusForbidden || reply.Error == nil || reply.Result != nil || string(reply.ID) != fmt.Sprint(id) ||
		reply.JSONRPC != "2.0" || !strings.Contains(reply.Error.Message, "cannot change that") {
		t.Fatalf("%s: %d %s, want 403 with a JSON-RPC error for id %d", what, code, body, id)
	}
}

// The binding is the connection's: fixed at initialize, so a request of
// the session that names another session, by its URL or by the
// Parley-Session header (or none, or both disagreeing), is refused with
// 403 and a JSON-RPC error, for every tool and resource, and nothing of the
// other session is read or written.
func TestBindingFixedAtInitialize(t *testing.T) {
	p := newPipeStack(t)
	a, b := p.createSession("A"), p.createSession("B")
	p.human(a, "A's secret")
	ctx := context.Background()
	if err := p.store.SetCursor(ctx, AgentStateCursor(a, "plan"), "A's plan"); err != nil {
		t.Fatal(err)
	}
	bound := p.initWith(t, "session="+string(b), nil)
	unbound := p.initWith(t, "", nil)

	requests := []string{
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent.state","arguments":{"key":"plan"}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"agent.state","arguments":{"key":"plan","value":"overwritten"}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"chat.assistant.post","arguments":{"content":"posted into A"}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"chat_read_since","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"` + InboxURI + `"}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"resources/read","params":{"uri":"` + SessionInboxURI(a) + `"}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"` + InboxURI + `"}}`,
		`{"jsonrpc":"2.0","id":%d,"method":"resources/subscribe","params":{"uri":"` + SessionInboxURI(a) + `"}}`,
	}
	for _, tc := range []struct {
		name    string
		sid     string
		query   string
		headers map[string]string
	}{
		{"B's connection, ?session=A", bound, "session=" + string(a), nil},
		{"B's connection, header A", bound, "", map[string]string{SessionHeader: string(a)}},
		{"B's connection, URL B and header A", bound, "session=" + string(b), map[string]string{SessionHeader: string(a)}},
		{"B's connection, unbound", bound, "", nil},
		{"an unbound connection, ?session=A", unbound, "session=" + string(a), nil},
		{"an unbound connection, header A", unbound, "", map[string]string{SessionHeader: string(a)}},
	} {
		for i, req := range requests {
			code, _, body := p.postWith(t, tc.query, tc.headers, tc.sid, fmt.Sprintf(req, 100+i))
			refused(t, tc.name+": "+req, code, body, 100+i)
		}
		// The GET stream and DELETE too: the session stays.
		req, _ := http.NewRequest(http.MethodDelete, "http://parley/mcp?"+tc.query, nil)
		req.Header.Set(headerSessionID, tc.sid)
		for k, v := range tc.headers {
			req.Header.Set(k, v)
		}
		resp, err := p.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("%s: DELETE answered %d", tc.name, resp.StatusCode)
		}
	}

	// Nothing of A was read or written, and nothing subscribed.
	if v, err := p.store.Cursor(ctx, AgentStateCursor(a, "plan")); err != nil || v != "A's plan" {
		t.Fatalf("A's agent.state: %q %v", v, err)
	}
	msgs, err := p.store.Inbox(ctx, a, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if m.Role == core.RoleAssistant {
			t.Fatalf("a message was posted into A: %+v", m)
		}
	}
	if p.srv.subscribed(bound) || p.srv.subscribed(unbound) {
		t.Fatal("a refused subscription was recorded")
	}

	// The connections still work as they were made.
	code, _, body := p.postWith(t, "session="+string(b), nil, bound,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"agent.state","arguments":{"key":"plan"}}}`)
	if code != http.StatusOK || !strings.Contains(body, string(b)) || strings.Contains(body, "A's plan") {
		t.Fatalf("B's connection on its own URL: %d %s", code, body)
	}
	code, _, body = p.postWith(t, "", map[string]string{SessionHeader: string(b)}, bound,
		`{"jsonrpc":"2.0","id":8,"method":"resources/read","params":{"uri":"`+InboxURI+`"}}`)
	if code != http.StatusOK || strings.Contains(body, "A's secret") {
		t.Fatalf("B's connection by the header naming B: %d %s", code, body)
	}
	code, _, body = p.postWith(t, "", nil, unbound,
		`{"jsonrpc":"2.0","id":9,"method":"resources/read","params":{"uri":"`+InboxURI+`"}}`)
	if code != http.StatusOK || !strings.Contains(body, "A's secret") {
		t.Fatalf("the unbound connection: %d %s", code, body)
	}
}

// An initialize that fails (here, bound to no session) leaves no session
// behind: mcp-go registers one for it anyway, which nobody could use or
// end.
func TestFailedInitializeLeavesNoSession(t *testing.T) {
	p := newPipeStack(t)
	for range 3 {
		code, sid, body := p.postWith(t, "session=nonexistent", nil, "", initLine)
		if code != http.StatusOK || !strings.Contains(body, `"error"`) || !strings.Contains(body, "nonexistent") {
			t.Fatalf("initialize bound to no session: %d %s", code, body)
		}
		if sid == "" {
			continue
		}
		if err := p.srv.mcp.SendNotificationToSpecificClient(sid, "notifications/message", nil); !errors.Is(err, server.ErrSessionNotFound) {
			t.Fatalf("the failed initialize's session %s is still registered: %v", sid, err)
		}
		if code, _, _ := p.post(t, sid, toolsList); code != http.StatusNotFound {
			t.Fatalf("the failed initialize's session answers %d", code)
		}
	}
	if n := p.srv.Agents(); n != 0 {
		t.Fatalf("%d agents", n)
	}
}
