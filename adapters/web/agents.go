package web

import "net/http"

// Agent is one agent parley runs, as the page offers it for a new
// session.
type Agent struct {
	// Name is what a session names it by ("default" for the default).
	Name string `json:"name"`
	// Title is the agent as people read it: "Claude Code".
	Title string `json:"title"`
}

// runAgents serves GET /api/agents/run: {"agents": [{name, title}]}, the
// agents parley runs, the default first; empty when it runs none (agents
// then connect on their own, GET /api/agents says which listen).
func (a *Adapter) runAgents(w http.ResponseWriter, _ *http.Request) {
	agents := a.opts.Agents
	if agents == nil {
		agents = []Agent{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"agents": agents})
}
