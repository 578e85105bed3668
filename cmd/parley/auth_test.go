package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	tests := []struct {
		name   string
		token  string
		header string
		query  string
		want   int
	}{
		{"no token configured", "", "", "", http.StatusNoContent},
		{"bearer", "s3cret", "Bearer s3cret", "", http.StatusNoContent},
		{"query for EventSource", "s3cret", "", "?access_token=s3cret", http.StatusNoContent},
		{"missing", "s3cret", "", "", http.StatusUnauthorized},
		{"wrong", "s3cret", "Bearer nope", "", http.StatusUnauthorized},
		{"wrong scheme", "s3cret", "Basic s3cret", "", http.StatusUnauthorized},
		{"header wins over query", "s3cret", "Bearer nope", "?access_token=s3cret", http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/health"+tt.query, nil)
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
