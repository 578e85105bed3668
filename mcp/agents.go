package mcp

import (
	"log/slog"
	"sync"
	"time"
)

// agents tracks the agents connected, for the operator's log and metrics:
// a 2025-11-25 client from its initialize until mcp-go unregisters its
// session (it ended it, or its stream went away), and a 2026-07-28 client,
// which has no session, while a subscriptions/listen stream is open. Each
// connection and disconnection is one info line, without any content.
type agents struct {
	log      *slog.Logger
	mu       sync.Mutex
	sessions map[string]agentInfo
	listens  int
}

type agentInfo struct {
	client string
	since  time.Time
}

func newAgents(log *slog.Logger) *agents {
	return &agents{log: log, sessions: map[string]agentInfo{}}
}

// initialized records a 2025-11-25 client's initialize; own is the
// daemon's own client (the orchestrator).
func (a *agents) initialized(session, client, version, protocol string, own bool) {
	a.mu.Lock()
	_, again := a.sessions[session]
	a.sessions[session] = agentInfo{client: client + " " + version, since: time.Now()}
	a.mu.Unlock()
	if !again {
		attrs := []any{"client", client, "version", version, "protocol", protocol, "mcp_session", session}
		if own {
			attrs = append(attrs, "own", true) // the daemon's orchestrator
		}
		a.log.Info("agent connected", attrs...)
	}
}

// unregistered records the end of an MCP session; sessions that never
// initialized (mcp-go's per-request ones) are not agents.
func (a *agents) unregistered(session string) {
	a.mu.Lock()
	info, ok := a.sessions[session]
	delete(a.sessions, session)
	a.mu.Unlock()
	if ok {
		a.log.Info("agent disconnected", "client", info.client, "mcp_session", session,
			"connected_for", time.Since(info.since).Round(time.Second))
	}
}

// listening records a 2026-07-28 listen stream on inboxes; the returned
// function records its end.
func (a *agents) listening(inboxes []string) (ended func()) {
	a.mu.Lock()
	a.listens++
	a.mu.Unlock()
	since := time.Now()
	a.log.Info("agent listening", "inboxes", inboxes)
	return func() {
		a.mu.Lock()
		a.listens--
		a.mu.Unlock()
		a.log.Info("agent stopped listening", "inboxes", inboxes, "listened_for", time.Since(since).Round(time.Second))
	}
}

// count is the number of agents connected now.
func (a *agents) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.sessions) + a.listens
}

// has reports whether session is an initialized 2025-11-25 session.
func (a *agents) has(session string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.sessions[session]
	return ok
}
