package agenttest

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
)

// Offline is an HTTP proxy on loopback that refuses every request with
// 403 and records where it was going. An agent whose environment names it
// as its proxy (Env) reaches loopback directly and nothing else: OpenCode
// (Bun) and Codex (reqwest) both honour HTTPS_PROXY and NO_PROXY. On a
// machine with network access the tests would otherwise reach OpenCode's
// model catalogue and npm; here they fail fast and are written down.
type Offline struct {
	URL string

	mu    sync.Mutex
	hosts []string
}

// NewOffline starts the proxy; it is closed when the test ends.
func NewOffline(tb testing.TB) *Offline {
	tb.Helper()
	o := &Offline{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// CONNECT names host:port; a plain proxied request its absolute
		// URL's host.
		host := r.Host
		if r.Method != http.MethodConnect && r.URL.Host != "" {
			host = r.URL.Host
		}
		o.mu.Lock()
		o.hosts = append(o.hosts, host)
		o.mu.Unlock()
		http.Error(w, "agenttest: no network beyond loopback in tests", http.StatusForbidden)
	}))
	o.URL = srv.URL
	tb.Cleanup(srv.Close)
	return o
}

// Env returns the proxy variables, upper and lower case, that send an
// agent's traffic beyond loopback here.
func (o *Offline) Env() []string {
	const loopback = "127.0.0.1,localhost,::1"
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		env = append(env, k+"="+o.URL)
	}
	return append(env, "NO_PROXY="+loopback, "no_proxy="+loopback)
}

// Hosts returns the hosts (host:port for CONNECT) requests were refused
// for, each once, in the order first seen.
func (o *Offline) Hosts() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, h := range o.hosts {
		if !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	return out
}
