package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/cmd/parley/internal/metrics"
	"github.com/parley-chat/parley/core"
)

// TestRoutesNeedToken: with a token set, only the page and the liveness
// probe answer without it.
func TestRoutesNeedToken(t *testing.T) {
	mcpOK := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h, err := newHTTPServer(serverOptions{Listen: "127.0.0.1:0", Token: "s3cret"}, web.New(web.Options{}), mcpOK, metrics.New(metrics.Sources{}))
	if err != nil {
		t.Fatal(err)
	}
	defer h.ln.Close()
	tests := []struct {
		method, path string
		want         int
	}{
		// Not attached to a store: the probe says parley is not running.
		{"GET", "/api/health", http.StatusServiceUnavailable},
		{"HEAD", "/api/health", http.StatusServiceUnavailable},
		{"POST", "/api/health", http.StatusUnauthorized},
		{"GET", "/api/sessions", http.StatusUnauthorized},
		{"GET", "/api/pairing", http.StatusUnauthorized},
		{"GET", "/api/healthz", http.StatusUnauthorized},
		{"POST", "/mcp", http.StatusUnauthorized},
		{"GET", "/metrics", http.StatusUnauthorized},
		{"GET", "/", http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(tt.method, tt.path, nil)
			r.Host = "127.0.0.1:8765"
			r.Header.Set("Content-Type", "application/json")
			h.srv.Handler.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
		})
	}
}

// TestRouteClasses: each class of route the server mounts gets exactly its
// checks. A request that passes them all reaches the route's handler
// (ok); then each check is broken alone: a foreign Host (the browser
// guard), a form POST (the guard's JSON rule), no token, a body past the
// API's limit and one past MCP's. Webhooks skip everything: the platform's
// secret is their check.
func TestRouteClasses(t *testing.T) {
	reached := func(status int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.WriteHeader(status)
		})
	}
	page := web.New(web.Options{Pairing: noPairings{}})
	h, err := newHTTPServer(serverOptions{Listen: "127.0.0.1:0", Token: "s3cret"}, page, reached(http.StatusAccepted),
		metrics.New(metrics.Sources{}), route{path: "/slack/events", handler: reached(http.StatusNoContent), webhook: true})
	if err != nil {
		t.Fatal(err)
	}
	defer h.ln.Close()

	const (
		guarded = http.StatusForbidden
		notJSON = http.StatusUnsupportedMediaType
		noToken = http.StatusUnauthorized
		tooBig  = http.StatusRequestEntityTooLarge
	)
	apiBig, mcpBig := strings.Repeat(" ", 1<<20+1), strings.Repeat(" ", 4<<20+1)
	tests := []struct {
		class        string
		method, path string
		// ok is what the handler answers a request that passes; the
		// others what each broken check gets.
		ok, foreignHost, form, noToken, apiBig, mcpBig int
	}{
		{"page", "GET", "/", http.StatusOK, guarded, http.StatusOK, http.StatusOK, http.StatusOK, http.StatusOK},
		{"page, changes", "POST", "/", http.StatusMethodNotAllowed, guarded, notJSON, http.StatusMethodNotAllowed, http.StatusMethodNotAllowed, http.StatusMethodNotAllowed},
		{"liveness", "GET", "/api/health", http.StatusServiceUnavailable, guarded, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
		{"api", "POST", "/api/chat", http.StatusServiceUnavailable, guarded, notJSON, noToken, tooBig, tooBig},
		{"pairing", "GET", "/api/pairing", http.StatusOK, guarded, http.StatusOK, noToken, tooBig, tooBig},
		{"pairing, changes", "POST", "/api/pairing/ABCD-EFGH/approve", http.StatusNotFound, guarded, notJSON, noToken, tooBig, tooBig},
		{"mcp", "POST", "/mcp", http.StatusAccepted, guarded, notJSON, noToken, http.StatusAccepted, tooBig},
		{"metrics", "GET", "/metrics", http.StatusOK, guarded, http.StatusOK, noToken, http.StatusOK, http.StatusOK},
		{"webhook", "POST", "/slack/events", http.StatusNoContent, http.StatusNoContent, http.StatusNoContent, http.StatusNoContent, http.StatusNoContent, http.StatusNoContent},
	}
	do := func(method, path, host, contentType, token, body string) (int, string) {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Host = host
		r.Header.Set("Content-Type", contentType)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		h.srv.Handler.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}
	for _, tt := range tests {
		t.Run(tt.class, func(t *testing.T) {
			const host, json, form = "127.0.0.1:8765", "application/json", "application/x-www-form-urlencoded"
			for _, c := range []struct {
				check                    string
				host, ctype, token, body string
				want                     int
			}{
				{"passing every check", host, json, "s3cret", "{}", tt.ok},
				{"foreign Host", "evil.example", json, "s3cret", "{}", tt.foreignHost},
				{"form", host, form, "s3cret", "a=b", tt.form},
				{"no token", host, json, "", "{}", tt.noToken},
				{"past the API's limit", host, json, "s3cret", apiBig, tt.apiBig},
				{"past MCP's limit", host, json, "s3cret", mcpBig, tt.mcpBig},
			} {
				if got, body := do(tt.method, tt.path, c.host, c.ctype, c.token, c.body); got != c.want {
					t.Errorf("%s %s, %s: status %d, want %d: %.200s", tt.method, tt.path, c.check, got, c.want, body)
				}
			}
		})
	}
	// The refusals of /mcp are JSON-RPC, those of the rest /api's.
	if _, body := do("POST", "/mcp", "127.0.0.1", "application/json", "s3cret", mcpBig); !isJSONRPCError(body) {
		t.Errorf("/mcp refused a large body with %s", body)
	}
}

// isJSONRPCError reports whether body is a JSON-RPC error without an id.
func isJSONRPCError(body string) bool {
	var e struct {
		Version string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct{ Code int }
	}
	return json.Unmarshal([]byte(body), &e) == nil && e.Version == "2.0" && string(e.ID) == "null" && e.Error.Code == -32600
}

// noPairings is a pairing service with no code waiting and nobody
// admitted, as commands.Service answers with pairing on and nothing asked.
type noPairings struct{}

func (noPairings) Pairings(context.Context) ([]core.PairingRequest, []core.Admission, error) {
	return nil, nil, nil
}

func (noPairings) ApprovePairing(_ context.Context, code string) (core.Admission, error) {
	return core.Admission{}, &core.UserError{Msg: "no pairing code " + code + " is waiting", Err: core.ErrNotFound}
}

func (noPairings) DenyPairing(_ context.Context, code string) (core.PairingRequest, error) {
	return core.PairingRequest{}, &core.UserError{Msg: "no pairing code " + code + " is waiting", Err: core.ErrNotFound}
}

// TestWebhooksSkipTheGuard: a platform posts to its webhook under its
// public name, Slack as a form; the route is answered while parley's own
// routes refuse that name.
func TestWebhooksSkipTheGuard(t *testing.T) {
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mine := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h, err := newHTTPServer(serverOptions{Listen: "127.0.0.1:0"}, web.New(web.Options{}), nil, metrics.New(metrics.Sources{}),
		route{path: "/slack/events", handler: hook, webhook: true}, route{path: "/api/pairing", handler: mine})
	if err != nil {
		t.Fatal(err)
	}
	defer h.ln.Close()
	r := httptest.NewRequest("POST", "/slack/events", strings.NewReader("payload=%7B%7D"))
	r.Host = "bot.example.org"
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	h.srv.Handler.ServeHTTP(w, r)
	if w.Code != http.StatusNoContent {
		t.Errorf("webhook: %d %s", w.Code, w.Body)
	}
	r = httptest.NewRequest("POST", "/api/pairing", strings.NewReader("{}"))
	r.Host = "bot.example.org"
	r.Header.Set("Content-Type", "application/json")
	w = httptest.NewRecorder()
	h.srv.Handler.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("pairing under the webhook's name: %d %s", w.Code, w.Body)
	}
}

// TestIdleConnectionClosed: a keep-alive connection left idle is closed
// after the configured IdleTimeout, instead of being held forever.
func TestIdleConnectionClosed(t *testing.T) {
	h, err := newHTTPServer(serverOptions{Listen: "127.0.0.1:0", IdleTimeout: 100 * time.Millisecond},
		web.New(web.Options{}), nil, metrics.New(metrics.Sources{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.serve(ctx) }()
	defer func() { cancel(); <-done }()

	c, err := net.Dial("tcp", h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection after the response; nothing to test")
	}
	// Without an idle timeout the server would hold the connection and
	// this read would hit its deadline instead of the end of the stream.
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	n, err := br.Read(make([]byte, 1))
	if !errors.Is(err, io.EOF) {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the idle connection was still open after 20s")
		}
		t.Fatalf("read %d bytes, %v; want the server to close the connection", n, err)
	}
}

// TestServerKeepsConnections: the daemon's server puts each request's
// connection in its context (httpguard.ConnContext), which the event
// streams need to bound their send buffer (httpguard.BoundStream).
func TestServerKeepsConnections(t *testing.T) {
	probe := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := httpguard.ConnOf(r); c == nil || c.RemoteAddr().String() != r.RemoteAddr {
			http.Error(w, "no connection in the request's context", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h, err := newHTTPServer(serverOptions{Listen: "127.0.0.1:0"}, web.New(web.Options{}), nil, metrics.New(metrics.Sources{}),
		route{path: "/probe", handler: probe})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.serve(ctx) }()
	defer func() { cancel(); <-done }()
	resp, err := http.Get("http://" + h.Addr() + "/probe")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
