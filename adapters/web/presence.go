package web

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/parley-chat/parley/core"
)

// Agent presence on the page. The page tells people whether an agent will
// read what they write: "no agent connected" rather than "agent is
// working" when no agent listens to the session. What listens is the MCP
// server's to say (a core.Presence, given with SetPresence); the adapter
// serves it as GET /api/agents and sends it on every event stream, once
// when the stream starts and again at every change, as
//
//	event: agents
//	data: {"kind":"agents","ready":true,"all_sessions":0,"sessions":{"<id>":1}}
//
// without an id, so it does not move a client's Last-Event-ID. A session
// has an agent when ready and all_sessions > 0 or sessions[id] > 0.

type presenceBox struct{ p core.Presence }

// SetPresence gives the adapter what tells it which sessions have an agent
// listening. cmd calls it once the MCP server exists, before serving.
func (a *Adapter) SetPresence(p core.Presence) { a.presence.Store(&presenceBox{p}) }

// agentsView is the body of GET /api/agents and of "agents" SSE messages.
type agentsView struct {
	Kind string `json:"kind"` // "agents"
	core.AgentStatus
}

// presenceNow returns the status and a channel closed at its next change;
// without a Presence, nobody is known to listen and nothing changes.
func (a *Adapter) presenceNow() (agentsView, <-chan struct{}) {
	v := agentsView{Kind: "agents", AgentStatus: core.AgentStatus{Sessions: map[core.SessionID]int{}}}
	b := a.presence.Load()
	if b == nil {
		return v, nil
	}
	// The channel first: a change after the read then still shows.
	ch := b.p.PresenceChanged()
	v.AgentStatus = b.p.AgentStatus()
	if v.Sessions == nil {
		v.Sessions = map[core.SessionID]int{}
	}
	return v, ch
}

// agents serves GET /api/agents.
func (a *Adapter) agents(w http.ResponseWriter, _ *http.Request) {
	v, _ := a.presenceNow()
	writeJSON(w, http.StatusOK, v)
}

// sendAgents writes an "agents" message.
func (s *stream) sendAgents(v agentsView) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("web: encode agents: %w", err)
	}
	fmt.Fprintf(&s.buf, "event: agents\ndata: %s\n\n", data)
	return s.flush()
}
