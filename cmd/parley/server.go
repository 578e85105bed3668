package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/cmd/parley/internal/metrics"
)

// httpServer is the daemon's one HTTP listener: the web page at /, the
// JSON/SSE API at /api/, MCP at /mcp and metrics at /metrics. Everything
// but the page's static files and the liveness probe (/api/health)
// requires the bearer token when one is set; request bodies are bounded in
// size and in time (bodies.go).
type httpServer struct {
	ln     net.Listener
	srv    *http.Server
	cancel context.CancelFunc // ends long-lived requests (SSE, MCP streams)
}

// route is an extra endpoint an adapter serves (a webhook); it carries its
// own authentication (the platform's secret token).
type route struct {
	path    string
	handler http.Handler
}

func newHTTPServer(listen, token string, page *web.Adapter, mcpHandler http.Handler, met *metrics.Metrics, routes ...route) (*httpServer, error) {
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.path, r.handler)
	}
	mux.Handle("/api/", requireToken(token, boundBody(maxAPIBody, apiRefusal, page.Handler())))
	// Liveness for probes, which hold no token: it says only whether
	// parley runs, no data.
	mux.Handle("GET /api/health", page.Handler())
	if mcpHandler != nil {
		mux.Handle("/mcp", requireToken(token, boundBody(maxMCPBody, mcpRefusal, mcpHandler)))
	}
	mux.Handle("/metrics", requireToken(token, met.Handler()))
	mux.Handle("/", page.Handler())
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("http: listen on %s (set [http] listen or --listen): %w", listen, err)
	}
	base, cancel := context.WithCancel(context.Background())
	return &httpServer{
		ln:     ln,
		cancel: cancel,
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
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
