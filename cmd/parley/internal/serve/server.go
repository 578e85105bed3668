package serve

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/cmd/parley/internal/metrics"
)

// httpServer is the daemon's one HTTP listener: the web page at /, the
// JSON/SSE API at /api/, MCP at /mcp and metrics at /metrics. Every route
// but the platforms' webhooks is behind httpguard's Browser (Host, and no
// cross-site or non-JSON request changes anything); everything but the
// page's static files and the liveness probe (/api/health) requires the
// bearer token when one is set (/mcp also admits the session credential of
// an agent parley runs, which binds it to that session); request bodies of
// /api/ and /mcp are
// bounded in size, and every request's body in time (BodyDeadline).
//
// The server's own timeouts are ReadHeaderTimeout and IdleTimeout only.
// A ReadTimeout or WriteTimeout would cut the long-lived streams (SSE,
// MCP's GET) along with slow clients, so the time bounds are per request
// instead: httpguard's BodyDeadline for bodies, and a deadline on each
// write of a stream (the web adapter's and package mcp's). ConnContext
// keeps each request's connection, for httpguard.BoundStream to fix the
// send buffer of /api/events streams.
type httpServer struct {
	ln     net.Listener
	srv    *http.Server
	cancel context.CancelFunc // ends long-lived requests (SSE, MCP streams)
}

// route is an extra endpoint: a platform's webhook, or one behind the
// browser guard only (its handler does its own authentication).
type route struct {
	path    string
	handler http.Handler
	// webhook marks an endpoint a platform's servers call (Telegram's
	// webhook, Slack's Events API). It skips the guard: it is reached by
	// the public name the platform was given, which need not be in
	// allowed_hosts, Slack posts forms, and it needs no protection from
	// browsers because every request must carry the platform's secret
	// (Telegram's secret token, Slack's signature), which the adapter
	// checks.
	webhook bool
}

// serverOptions configure newHTTPServer.
type serverOptions struct {
	Listen string
	// Listener, when set, is served instead of listening on Listen.
	Listener net.Listener
	Token    string
	// AllowedHosts are the names besides loopback ones the server
	// answers to ([http] allowed_hosts).
	AllowedHosts []string
	// MCPCredential admits a request to /mcp without Token: an agent's
	// session credential (mcp.Server.AgentAuthorized).
	MCPCredential func(*http.Request) bool
	// IdleTimeout closes keep-alive connections idle this long; 0 means
	// defaultIdleTimeout.
	IdleTimeout time.Duration
}

// defaultIdleTimeout is how long an idle keep-alive connection stays open.
// A browser reuses its connection within seconds while the page is used
// and keeps the event stream busy with heartbeats, so a minute and a half
// costs a returning client nothing, while connections left behind by
// clients that never close them are reclaimed rather than held forever
// (net/http's default when no ReadTimeout is set).
const defaultIdleTimeout = 90 * time.Second

func newHTTPServer(o serverOptions, page *web.Adapter, mcpHandler http.Handler, met *metrics.Metrics, routes ...route) (*httpServer, error) {
	g := httpguard.New(httpguard.Options{Token: o.Token, AllowedHosts: o.AllowedHosts, MCPCredential: o.MCPCredential})
	mux := http.NewServeMux()
	guarded := http.NewServeMux()
	for _, r := range routes {
		if r.webhook {
			mux.Handle(r.path, r.handler)
		} else {
			guarded.Handle(r.path, r.handler)
		}
	}
	guarded.Handle("/api/", g.API(page.Handler()))
	// Liveness for probes, which hold no token: it says only whether
	// parley runs, no data.
	guarded.Handle("GET /api/health", page.Handler())
	if mcpHandler != nil {
		guarded.Handle("/mcp", g.MCP(mcpHandler))
	}
	guarded.Handle("/metrics", g.Token(met.Handler()))
	guarded.Handle("/", page.Handler())
	mux.Handle("/", g.Browser(guarded))
	ln := o.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", o.Listen)
		if err != nil {
			return nil, fmt.Errorf("http: listen on %s (set [http] listen or --listen): %w", o.Listen, err)
		}
	}
	base, cancel := context.WithCancel(context.Background())
	return &httpServer{
		ln:     ln,
		cancel: cancel,
		srv: &http.Server{
			Handler:           httpguard.BodyDeadline(mux),
			ConnContext:       httpguard.ConnContext,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       cmp.Or(o.IdleTimeout, defaultIdleTimeout),
			BaseContext:       func(net.Listener) context.Context { return base },
		},
	}, nil
}

// Addr is the address the server listens on (useful with port 0).
func (h *httpServer) Addr() string { return h.ln.Addr().String() }

// serve serves until ctx ends, then stops taking requests and ends the
// long-lived ones.
func (h *httpServer) serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- h.srv.Serve(h.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("http: %w", err)
	case <-ctx.Done():
	}
	h.cancel()
	stop, done := context.WithTimeout(context.Background(), 5*time.Second)
	defer done()
	if err := h.srv.Shutdown(stop); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("http: shutdown: %w", err)
	}
	return nil
}
