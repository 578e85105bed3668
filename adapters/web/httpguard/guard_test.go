package httpguard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGuardClasses: each class of route gets its checks and answers their
// refusals in its own format; Browser alone asks for no token and bounds no
// body.
func TestGuardClasses(t *testing.T) {
	g := New(Options{Token: "s3cret"})
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			t.Errorf("reading the body: %v", err)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	big := strings.Repeat("x", MaxMCPBody+1)
	tests := []struct {
		name   string
		h      http.Handler
		auth   string
		body   string
		status int
		want   string // the body, when refused
	}{
		{"API without the token", g.API(read), "", "{}", http.StatusUnauthorized,
			`{"error":"missing or wrong bearer token: send Authorization: Bearer \u003chttp.token\u003e"}`},
		{"API with it", g.API(read), "Bearer s3cret", "{}", http.StatusNoContent, ""},
		{"API past its limit", g.API(read), "Bearer s3cret", strings.Repeat("x", MaxAPIBody+1), http.StatusRequestEntityTooLarge,
			`{"error":"the request body is larger than the limit of 1 MiB"}`},
		{"MCP without the token", g.MCP(read), "", "{}", http.StatusUnauthorized,
			`{"error":"missing or wrong bearer token: send Authorization: Bearer \u003chttp.token\u003e"}`},
		{"MCP past the API's limit", g.MCP(read), "Bearer s3cret", strings.Repeat("x", MaxAPIBody+1), http.StatusNoContent, ""},
		{"MCP past its limit", g.MCP(read), "Bearer s3cret", big, http.StatusRequestEntityTooLarge,
			`{"error":{"code":-32600,"message":"the request body is larger than the limit of 4 MiB"},"id":null,"jsonrpc":"2.0"}`},
		{"Token without it", g.Token(read), "Bearer nope", "", http.StatusUnauthorized,
			`{"error":"missing or wrong bearer token: send Authorization: Bearer \u003chttp.token\u003e"}`},
		{"Token bounds no body", g.Token(read), "Bearer s3cret", big, http.StatusNoContent, ""},
		{"Browser asks for no token and bounds no body", g.Browser(read), "", big, http.StatusNoContent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
			r.Host = "127.0.0.1:8765"
			r.Header.Set("Content-Type", "application/json")
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			tt.h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %.200s", w.Code, tt.status, w.Body)
			}
			if tt.want == "" {
				return
			}
			if got := strings.TrimSpace(w.Body.String()); got != tt.want {
				t.Errorf("body %s, want %s", got, tt.want)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if tt.status == http.StatusUnauthorized && w.Header().Get("WWW-Authenticate") != `Bearer realm="parley"` {
				t.Errorf("WWW-Authenticate %q", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
}

// TestNoToken: an empty token lets every class through without one.
func TestNoToken(t *testing.T) {
	g := New(Options{})
	for name, h := range map[string]http.Handler{"API": g.API(noContent), "MCP": g.MCP(noContent), "Token": g.Token(noContent)} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
		if w.Code != http.StatusNoContent {
			t.Errorf("%s: status %d", name, w.Code)
		}
	}
}

// TestMCPCredential: a request MCPCredential accepts reaches MCP without
// the token, its body still bounded; it opens no other route.
func TestMCPCredential(t *testing.T) {
	g := New(Options{Token: "s3cret", MCPCredential: func(r *http.Request) bool { return r.Header.Get("Agent") == "ok" }})
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	for _, tt := range []struct {
		name   string
		h      http.Handler
		agent  string
		body   string
		status int
	}{
		{"MCP with the credential", g.MCP(ok), "ok", "{}", http.StatusNoContent},
		{"MCP with another", g.MCP(ok), "forged", "{}", http.StatusUnauthorized},
		{"MCP with the credential past its limit", g.MCP(ok), "ok", strings.Repeat("x", MaxMCPBody+1), http.StatusRequestEntityTooLarge},
		{"API with the credential", g.API(ok), "ok", "{}", http.StatusUnauthorized},
		{"Token with the credential", g.Token(ok), "ok", "", http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/x", strings.NewReader(tt.body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Agent", tt.agent)
			w := httptest.NewRecorder()
			tt.h.ServeHTTP(w, r)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d", w.Code, tt.status)
			}
		})
	}
}
