package httpguard

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// browserGuard keeps browsers from being turned against parley. It wraps
// every route but the platforms' webhooks and checks, before anything is
// read or written:
//
//   - The Host header, against DNS rebinding: a page on evil.example whose
//     name the attacker points at 127.0.0.1 is same-origin with parley in
//     the browser's eyes, but its requests carry Host evil.example. Only
//     loopback names and addresses (localhost, 127.0.0.0/8, ::1), the
//     names the operator lists in [http] allowed_hosts, and the address
//     the connection was made to when the Host is that literal IP (how a
//     parley listening on 0.0.0.0 is reached by address) are answered. A rebinding needs a name, so none of these can be one.
//     Others get 403. This is the one Host check: mcp-go's own, which only
//     knows loopback, is switched off in package mcp so that allowed_hosts
//     works for /mcp too.
//   - Requests that change state (every method but GET, HEAD and OPTIONS)
//     against cross-site request forgery: refused when the browser says
//     they are cross-site (Sec-Fetch-Site: cross-site) or when they carry
//     an Origin other than parley's own (the same host and port as the
//     Host header, or an allowed_hosts name, for a reverse proxy that
//     rewrites Host); and a POST must be Content-Type application/json,
//     which no form and no no-cors fetch can send without a CORS preflight
//     that parley never grants. Clients that are not browsers (curl, the
//     MCP clients, parley's own subcommands) send no Origin and no
//     Sec-Fetch-Site, so they only need the content type.
//
// The checks hold with a token set too: a token in the page's localStorage
// does not travel with a forged request, but the checks cost nothing and
// protect the token-less default alike.
type browserGuard struct {
	// allowed are the configured names and addresses, lower case, without
	// port or brackets.
	allowed map[string]bool
}

// newBrowserGuard builds the guard for the names of [http] allowed_hosts.
func newBrowserGuard(allowedHosts []string) *browserGuard {
	g := &browserGuard{allowed: map[string]bool{}}
	for _, h := range allowedHosts {
		g.allowed[hostName(h)] = true
	}
	return g
}

// wrap returns h behind the guard's checks.
func (g *browserGuard) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.hostAllowed(r) {
			apiRefusal(w, r, http.StatusForbidden, fmt.Sprintf(
				"parley does not answer to the host name %q: add it to [http] allowed_hosts (PARLEY_HTTP_ALLOWED_HOSTS) if parley is meant to be reached by it",
				r.Host))
			return
		}
		if status, msg := g.forgery(r); status != 0 {
			apiRefusal(w, r, status, msg)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether r's Host is one parley answers to. An absent
// Host (HTTP/1.0) does not come from a browser, which always sends one.
func (g *browserGuard) hostAllowed(r *http.Request) bool {
	if r.Host == "" {
		return true
	}
	name := hostName(r.Host)
	if g.allowed[name] || loopbackName(name) {
		return true
	}
	ip, err := netip.ParseAddr(name)
	if err != nil {
		return false
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		if ap, err := netip.ParseAddrPort(local.String()); err == nil && ap.Addr().Unmap() == ip.Unmap() {
			return true
		}
	}
	return false
}

// forgery says why a state-changing request r cannot be trusted to come
// from parley's page or a non-browser client: a status and a message, or
// 0 when it can.
func (g *browserGuard) forgery(r *http.Request) (int, string) {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return 0, ""
	}
	if strings.EqualFold(r.Header.Get("Sec-Fetch-Site"), "cross-site") {
		return http.StatusForbidden, "cross-site requests cannot change anything in parley (Sec-Fetch-Site: cross-site)"
	}
	if origin := r.Header.Get("Origin"); origin != "" && !g.sameOrigin(origin, r.Host) {
		return http.StatusForbidden, fmt.Sprintf("requests from the page %q cannot change anything in parley; use parley's own page", origin)
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return http.StatusUnsupportedMediaType, "send the request as JSON, with the header Content-Type: application/json (curl: -H 'Content-Type: application/json')"
		}
	}
	return 0, ""
}

// sameOrigin reports whether an Origin header names parley itself: the
// same host and port the request was sent to, or a configured name.
// "null" (sandboxed frames, file: pages) never does.
func (g *browserGuard) sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	if g.allowed[hostName(u.Host)] {
		return true
	}
	return strings.EqualFold(withPort(u.Host, u.Scheme), withPort(host, u.Scheme))
}

// withPort adds the scheme's default port to a host without one, so that
// https://example.org and example.org:443 compare equal.
func withPort(host, scheme string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	if scheme == "https" {
		return net.JoinHostPort(strings.Trim(host, "[]"), "443")
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), "80")
}

// hostName is the name or address of a Host header or allowed_hosts
// entry: lower case, without port, brackets or a trailing dot.
func hostName(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
}

// loopbackName reports whether name always means this machine: localhost
// and loopback addresses. Subdomains of localhost are left out: not every
// resolver keeps them on this machine.
func loopbackName(name string) bool {
	if name == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(name)
	return err == nil && ip.Unmap().IsLoopback()
}
