package httpguard

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBrowserHost: loopback names and addresses, configured names and the
// literal address the connection was made to are answered; any other name,
// which a DNS-rebinding page would bring, gets 403 before the handler runs.
func TestBrowserHost(t *testing.T) {
	g := New(Options{AllowedHosts: []string{"Parley.Example.org", "[2001:db8::1]:8765", "proxy.example.net."}})
	tests := []struct {
		host  string
		local string // the address the connection was made to
		want  int
	}{
		{"", "", http.StatusNoContent},
		{"127.0.0.1:8765", "", http.StatusNoContent},
		{"127.0.0.2", "", http.StatusNoContent},
		{"localhost:8765", "", http.StatusNoContent},
		{"LOCALHOST", "", http.StatusNoContent},
		{"localhost.", "", http.StatusNoContent},
		{"[::1]:8765", "", http.StatusNoContent},
		{"[::ffff:127.0.0.1]:8765", "", http.StatusNoContent},
		{"parley.example.org", "", http.StatusNoContent},
		{"parley.example.org:443", "", http.StatusNoContent},
		{"PARLEY.EXAMPLE.ORG.", "", http.StatusNoContent},
		{"proxy.example.net", "", http.StatusNoContent},
		{"[2001:db8::1]", "", http.StatusNoContent},
		{"192.0.2.7:8765", "192.0.2.7:8765", http.StatusNoContent},
		{"192.0.2.7:8765", "[::ffff:192.0.2.7]:8765", http.StatusNoContent},
		{"192.0.2.7:8765", "192.0.2.8:8765", http.StatusForbidden},
		{"192.0.2.7", "", http.StatusForbidden},
		{"evil.example", "", http.StatusForbidden},
		{"evil.example:8765", "127.0.0.1:8765", http.StatusForbidden},
		{"127.0.0.1.evil.example", "", http.StatusForbidden},
		{"localhost.evil.example", "", http.StatusForbidden},
		{"app.localhost", "", http.StatusForbidden},
		{"other.example.org", "", http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.host+" via "+tt.local, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/sessions", nil)
			r.Host = tt.host
			if tt.local != "" {
				addr, err := net.ResolveTCPAddr("tcp", tt.local)
				if err != nil {
					t.Fatal(err)
				}
				r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
			}
			w := httptest.NewRecorder()
			g.Browser(noContent).ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.want != http.StatusForbidden {
				return
			}
			want := `parley does not answer to the host name "` + tt.host + `": add it to [http] allowed_hosts (PARLEY_HTTP_ALLOWED_HOSTS) if parley is meant to be reached by it`
			var e struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error != want || w.Header().Get("Content-Type") != "application/json" {
				t.Errorf("body %s (%s, %v), want the error %q", w.Body, w.Header().Get("Content-Type"), err, want)
			}
		})
	}
}

// TestBrowserForgery: what a cross-site page can send without a preflight
// changes nothing; the page's own requests, curl's and every read pass.
func TestBrowserForgery(t *testing.T) {
	g := New(Options{AllowedHosts: []string{"parley.example.org"}})
	const host = "127.0.0.1:8765"
	tests := []struct {
		name, method string
		header       map[string]string
		want         int
		body         string // the error, when refused
	}{
		{"form text/plain", "POST", map[string]string{"Content-Type": "text/plain", "Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"},
			http.StatusForbidden, "cross-site requests cannot change anything in parley (Sec-Fetch-Site: cross-site)"},
		{"cross-site in any case", "POST", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "Cross-Site"},
			http.StatusForbidden, "cross-site requests cannot change anything in parley (Sec-Fetch-Site: cross-site)"},
		{"foreign Origin", "POST", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"},
			http.StatusForbidden, `requests from the page "http://evil.example" cannot change anything in parley; use parley's own page`},
		{"null Origin", "POST", map[string]string{"Content-Type": "application/json", "Origin": "null"},
			http.StatusForbidden, `requests from the page "null" cannot change anything in parley; use parley's own page`},
		{"another local port", "POST", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"},
			http.StatusForbidden, `requests from the page "http://127.0.0.1:1" cannot change anything in parley; use parley's own page`},
		{"https on the http port", "POST", map[string]string{"Content-Type": "application/json", "Origin": "https://127.0.0.1"},
			http.StatusForbidden, `requests from the page "https://127.0.0.1" cannot change anything in parley; use parley's own page`},
		{"foreign Origin on a DELETE", "DELETE", map[string]string{"Origin": "http://evil.example"},
			http.StatusForbidden, `requests from the page "http://evil.example" cannot change anything in parley; use parley's own page`},
		{"no content type", "POST", nil,
			http.StatusUnsupportedMediaType, "send the request as JSON, with the header Content-Type: application/json (curl: -H 'Content-Type: application/json')"},
		{"urlencoded", "POST", map[string]string{"Content-Type": "application/x-www-form-urlencoded"},
			http.StatusUnsupportedMediaType, "send the request as JSON, with the header Content-Type: application/json (curl: -H 'Content-Type: application/json')"},
		{"multipart", "POST", map[string]string{"Content-Type": "multipart/form-data; boundary=x"},
			http.StatusUnsupportedMediaType, "send the request as JSON, with the header Content-Type: application/json (curl: -H 'Content-Type: application/json')"},
		{"the page", "POST", map[string]string{"Content-Type": "application/json", "Origin": "http://" + host, "Sec-Fetch-Site": "same-origin"}, http.StatusNoContent, ""},
		{"the page, Origin in another case", "POST", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:8765", "Sec-Fetch-Site": "same-origin"}, http.StatusNoContent, ""},
		{"the page under an allowed name", "POST", map[string]string{"Content-Type": "application/json", "Origin": "https://parley.example.org"}, http.StatusNoContent, ""},
		{"curl", "POST", map[string]string{"Content-Type": "application/json; charset=utf-8"}, http.StatusNoContent, ""},
		{"a DELETE needs no content type", "DELETE", nil, http.StatusNoContent, ""},
		{"a cross-site read", "GET", map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}, http.StatusNoContent, ""},
		{"HEAD", "HEAD", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusNoContent, ""},
		{"OPTIONS", "OPTIONS", map[string]string{"Origin": "http://evil.example"}, http.StatusNoContent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(tt.method, "/api/chat", strings.NewReader(`{"text":"hi"}`))
			r.Host = host
			for k, v := range tt.header {
				r.Header.Set(k, v)
			}
			w := httptest.NewRecorder()
			g.Browser(noContent).ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.want, w.Body)
			}
			if tt.body == "" {
				return
			}
			var e struct{ Error string }
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error != tt.body {
				t.Errorf("body %s (%v), want the error %q", w.Body, err, tt.body)
			}
		})
	}
}

// noContent stands for the guarded route.
var noContent = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
