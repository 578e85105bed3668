package httpguard

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tests := []struct {
		name         string
		token        string
		method, path string
		header       string
		query        string
		want         int
	}{
		{"no token configured", "", "GET", "/api/sessions", "", "", http.StatusNoContent},
		{"bearer", "s3cret", "GET", "/api/sessions", "Bearer s3cret", "", http.StatusNoContent},
		{"lower-case scheme", "s3cret", "POST", "/api/chat", "bearer s3cret", "", http.StatusNoContent},
		{"upper-case scheme", "s3cret", "POST", "/api/chat", "BEARER s3cret", "", http.StatusNoContent},
		{"query for EventSource", "s3cret", "GET", "/api/events", "", "?access_token=s3cret", http.StatusNoContent},
		{"query on a POST", "s3cret", "POST", "/api/chat", "", "?access_token=s3cret", http.StatusUnauthorized},
		{"query on a POST to the stream's path", "s3cret", "POST", "/api/events", "", "?access_token=s3cret", http.StatusUnauthorized},
		{"query on another GET", "s3cret", "GET", "/api/sessions", "", "?access_token=s3cret", http.StatusUnauthorized},
		{"query on MCP's stream", "s3cret", "GET", "/mcp", "", "?access_token=s3cret", http.StatusUnauthorized},
		{"missing", "s3cret", "GET", "/api/sessions", "", "", http.StatusUnauthorized},
		{"wrong", "s3cret", "GET", "/api/sessions", "Bearer nope", "", http.StatusUnauthorized},
		{"wrong scheme", "s3cret", "GET", "/api/sessions", "Basic s3cret", "", http.StatusUnauthorized},
		{"scheme alone", "s3cret", "GET", "/api/sessions", "Bearer", "", http.StatusUnauthorized},
		{"header wins over query", "s3cret", "GET", "/api/events", "Bearer nope", "?access_token=s3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, tt.path+tt.query, nil)
			if tt.header != "" {
				r.Header.Set("Authorization", tt.header)
			}
			w := httptest.NewRecorder()
			requireToken(tt.token, ok).ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Errorf("status %d, want %d", w.Code, tt.want)
			}
		})
	}
}

func TestHasToken(t *testing.T) {
	req := func(auth string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api/health", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	for _, tc := range []struct {
		token, auth string
		want        bool
	}{
		{"", "", true},
		{"s3cret", "Bearer s3cret", true},
		{"s3cret", "bearer s3cret", true},
		{"s3cret", "Bearer wrong", false},
		{"s3cret", "", false},
		{"s3cret", "Basic s3cret", false},
	} {
		if got := HasToken(tc.token, req(tc.auth)); got != tc.want {
			t.Errorf("HasToken(%q, %q) = %v, want %v", tc.token, tc.auth, got, tc.want)
		}
	}
}
