package mcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// proxied starts Proxy on a pair of pipes and connects mcp-go's stdio
// client to it, as an agent host launching `parley mcp` would.
func proxied(t *testing.T, opts ProxyOptions, modern bool) (*conn, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()   // client → proxy
	outR, outW := io.Pipe() // proxy → client
	ctx, cancel := context.WithCancel(context.Background())
	opts.Logger = testLogger()
	done := make(chan error, 1)
	go func() {
		err := Proxy(ctx, opts, inR, outW)
		outW.Close()
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		outR.Close()
	})
	var copts []client.ClientOption
	if !modern {
		copts = append(copts, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
	}
	c, err := start(t, client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))), copts...), modern)
	if err != nil {
		t.Fatal(err)
	}
	return c, done
}

// TestProxy drives `parley mcp` over stdio with both protocol generations:
// tools are listed and called, and notifications come through.
func TestProxy(t *testing.T) {
	for _, modern := range []bool{false, true} {
		name := "2025-11-25"
		if modern {
			name = "2026-07-28"
		}
		t.Run(name, func(t *testing.T) {
			st := newStack(t, t.TempDir(), stackOptions{})
			c, done := proxied(t, ProxyOptions{URL: st.url}, modern)
			ctx := context.Background()
			tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(tools.Tools) != len(toolNames) {
				t.Fatalf("%d tools through the proxy, want %d", len(tools.Tools), len(toolNames))
			}
			var created struct {
				SessionID string `json:"session_id"`
			}
			c.ok(t, "session_create", map[string]any{"title": "via stdio"}, &created)
			c.subscribe(t, InboxURI)
			m := st.human(sessionID(created.SessionID), "hello over stdio")
			if u := c.next(t); u.URI != InboxURI || len(u.Messages) != 1 || u.Messages[0].ID != m.ID {
				t.Fatalf("update %+v", u)
			}
			st.assistant(sessionID(created.SessionID), "no echo")
			c.none(t)
			c.fails(t, "chat.human.post", map[string]any{"content": ""}, "content is empty")

			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Proxy returned %v after stdin closed", err)
				}
			case <-time.After(waitFor):
				t.Fatal("Proxy did not return after stdin closed")
			}
		})
	}
}

// TestProxyOptions: the session binding and the bearer token reach the
// daemon; a daemon that is down gives a readable error.
func TestProxyOptions(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	a, b := st.createSession("a"), st.createSession("b")
	st.human(a, "for a")
	st.human(b, "for b")
	const token = "s3cret"
	auth := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		st.srv.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(func() { auth.CloseClientConnections(); auth.Close() })

	c, _ := proxied(t, ProxyOptions{URL: auth.URL + "/mcp", Token: token, Session: string(b)}, false)
	if got := contents(c.readInbox(t, InboxURI).Messages); !slices.Equal(got, []string{"for b"}) {
		t.Fatalf("bound inbox through the proxy: %v", got)
	}

	down := httptest.NewServer(http.NotFoundHandler())
	url := down.URL + "/mcp"
	down.Close()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() { _ = Proxy(context.Background(), ProxyOptions{URL: url}, inR, outW); outW.Close() }()
	defer inW.Close()
	cl := client.NewClient(transport.NewIO(outR, inW, io.NopCloser(strings.NewReader(""))))
	if err := cl.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, err := cl.Initialize(ctx, mcp.InitializeRequest{})
	if err == nil || !strings.Contains(err.Error(), "no parley daemon answers at "+url+" (connection refused): start it with `parley serve`") {
		t.Fatalf("initialize with the daemon down: %v", err)
	}
}

// TestProxyDaemonRestart: when the daemon restarts, the proxy initializes
// a new session and subscribes again, so the agent notices nothing.
func TestProxyDaemonRestart(t *testing.T) {
	dir := t.TempDir()
	var h atomic.Pointer[http.Handler]
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(func() { front.CloseClientConnections(); front.Close() })
	st := newStack(t, dir, stackOptions{handler: &h})
	a := st.createSession("a")
	c, _ := proxied(t, ProxyOptions{URL: front.URL + "/mcp"}, false)
	c.subscribe(t, InboxURI)
	st.human(a, "before")
	c.next(t)
	st.close()

	st = newStack(t, dir, stackOptions{handler: &h})
	var read InboxPage
	c.ok(t, "chat_read_since", nil, &read)
	if got := contents(read.Messages); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("after the restart: %v", got)
	}
	st.human(a, "after")
	if u := c.next(t); u.Messages[0].Content != "after" {
		t.Fatalf("update %+v", u)
	}
}
