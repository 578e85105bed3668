package httpguard

import (
	"net/http"
	"time"
)

const (
	// MaxMCPBody bounds a request to /mcp. The largest argument is
	// session.output's content (commands' MaxContent×4, 256 KiB by
	// default), which JSON escaping can make up to six times longer.
	MaxMCPBody = 4 << 20
	// MaxAPIBody bounds a request to /api, as the web adapter's own
	// decoding does (web.DefaultMaxBody).
	MaxAPIBody = 1 << 20
	// BodyTimeout is how long a client may take to send a request body.
	// Headers have the server's ReadHeaderTimeout. Neither applies to
	// the long-lived streams (SSE, MCP's GET), which have no body.
	BodyTimeout = 10 * time.Second
)

// Options configure a Guard.
type Options struct {
	// Token is the bearer token ([http] token); empty disables the token
	// check (the configuration refuses an empty token on non-loopback
	// addresses).
	Token string
	// AllowedHosts are the names besides loopback ones the server answers
	// to ([http] allowed_hosts).
	AllowedHosts []string
	// MCPCredential, when set, admits a request to MCP that it accepts
	// without the token: the credential of an agent parley runs, which
	// opens its own session's binding and nothing else (package mcp's
	// AgentAuthorized).
	MCPCredential func(*http.Request) bool
}

// Guard puts the checks of each class of route in front of a handler. It is
// safe for concurrent use.
type Guard struct {
	token   string
	browser *browserGuard
	mcpCred func(*http.Request) bool
}

// New returns the guard for o.
func New(o Options) *Guard {
	return &Guard{token: o.Token, browser: newBrowserGuard(o.AllowedHosts), mcpCred: o.MCPCredential}
}

// Browser returns h behind the Host check and, for requests that change
// state, the checks against cross-site request forgery (browser.go).
func (g *Guard) Browser(h http.Handler) http.Handler { return g.browser.wrap(h) }

// Token returns h behind the bearer token (token.go).
func (g *Guard) Token(h http.Handler) http.Handler { return requireToken(g.token, h) }

// API returns h behind the token, with its request bodies bounded to
// MaxAPIBody and refused as /api answers errors: {"error": "…"}.
func (g *Guard) API(h http.Handler) http.Handler {
	return g.Token(boundBody(MaxAPIBody, apiRefusal, h))
}

// MCP returns h behind the token — or Options.MCPCredential — with its
// request bodies bounded to MaxMCPBody and refused as JSON-RPC errors.
func (g *Guard) MCP(h http.Handler) http.Handler {
	bounded := boundBody(MaxMCPBody, mcpRefusal, h)
	withToken := g.Token(bounded)
	if g.mcpCred == nil {
		return withToken
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.mcpCred(r) {
			bounded.ServeHTTP(w, r)
			return
		}
		withToken.ServeHTTP(w, r)
	})
}
