package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// lockedBuffer is a log destination written by several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// relayOnce runs Proxy with lines on stdin until they are answered and
// returns the messages it wrote and its log at info level.
func relayOnce(t *testing.T, opts ProxyOptions, lines ...string) (out []map[string]any, log string) {
	t.Helper()
	var logs lockedBuffer
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	done := make(chan error, 1)
	inR, inW := io.Pipe()
	go func() { done <- Proxy(ctx, opts, inR, outW); outW.Close() }()
	go func() {
		for _, l := range lines {
			if _, err := io.WriteString(inW, l+"\n"); err != nil {
				return
			}
		}
	}()
	dec := json.NewDecoder(outR)
	answers := 0
	for _, l := range lines {
		if strings.Contains(l, `"id"`) {
			answers++
		}
	}
	for range answers {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("reading the proxy's answer: %v (log: %s)", err, logs.String())
		}
		out = append(out, m)
	}
	inW.Close()
	<-done
	return out, logs.String()
}

func errorMessage(t *testing.T, m map[string]any) string {
	t.Helper()
	e, ok := m["error"].(map[string]any)
	if !ok {
		t.Fatalf("no error in %v", m)
	}
	return e["message"].(string)
}

// `parley mcp` without a daemon says to start one, once on stderr however
// many messages fail, and the transport's retries stay out of the log.
func TestProxyNoDaemon(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/mcp"
	l.Close()
	out, log := relayOnce(t, ProxyOptions{URL: url}, initLine, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	want := "no parley daemon answers at " + url + " (connection refused): start it with `parley serve`"
	for _, m := range out {
		if msg := errorMessage(t, m); !strings.Contains(msg, want) {
			t.Errorf("answer %q, want it to say %q", msg, want)
		}
	}
	if n := strings.Count(log, "start it with `parley serve`"); n != 1 {
		t.Errorf("the log says it %d times, want once:\n%s", n, log)
	}
	if strings.Contains(log, "failed to") {
		t.Errorf("library noise in the log:\n%s", log)
	}
}

// A daemon that wants a token: the answer names --token and
// PARLEY_HTTP_TOKEN, and tells a missing token from a wrong one.
func TestProxyToken(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer right" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="parley"`)
			http.Error(w, "a bearer token is required", http.StatusUnauthorized)
			return
		}
		http.Error(w, "not here", http.StatusTeapot)
	}))
	defer hs.Close()
	for _, tc := range []struct{ token, want string }{
		{"", "requires a token: pass `parley mcp --token TOKEN` or set PARLEY_HTTP_TOKEN to the daemon's [http] token"},
		{"wrong", "refused the token: `parley mcp --token` (or PARLEY_HTTP_TOKEN, or [http] token in the configuration) must be the daemon's [http] token"},
	} {
		out, log := relayOnce(t, ProxyOptions{URL: hs.URL + "/mcp", Token: tc.token}, initLine)
		if msg := errorMessage(t, out[0]); !strings.Contains(msg, tc.want) {
			t.Errorf("token %q: answer %q, want %q", tc.token, msg, tc.want)
		}
		if !strings.Contains(log, tc.want) || strings.Contains(log, "wrong") {
			t.Errorf("token %q: log %q should say %q and never show the token", tc.token, log, tc.want)
		}
	}
}

// The client's notifications/initialized, written right behind its
// initialize, reaches the daemon with the session the initialize made,
// not before it.
func TestProxyInitializedOrder(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	var mu sync.Mutex
	var noSession []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte("notifications/initialized")) && r.Header.Get("Mcp-Session-Id") == "" {
				mu.Lock()
				noSession = append(noSession, string(body))
				mu.Unlock()
			}
		}
		st.srv.Handler().ServeHTTP(w, r)
	}))
	defer hs.Close()
	for range 5 {
		out, log := relayOnce(t, ProxyOptions{URL: hs.URL + "/mcp"}, initLine, `{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		for _, m := range out {
			if m["error"] != nil {
				t.Fatalf("answer %v (log %s)", m, log)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(noSession) > 0 {
		t.Fatalf("%d notifications/initialized went out before the session existed", len(noSession))
	}
}
