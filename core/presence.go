package core

// AgentStatus says whether the MCP chat server is ready and which sessions
// have an agent listening: a subscription to the session's inbox, or to
// the inbox of all sessions (which covers every session).
type AgentStatus struct {
	// Ready is true while the chat server serves and delivers
	// notifications.
	Ready bool `json:"ready"`
	// All is the number of agent connections listening to every session.
	All int `json:"all_sessions"`
	// Sessions maps each session with an agent listening to it alone to
	// the number of such connections.
	Sessions map[SessionID]int `json:"sessions"`
}

// Listening reports whether an agent listens to session's inbox.
func (a AgentStatus) Listening(session SessionID) bool {
	return a.Ready && (a.All > 0 || a.Sessions[session] > 0)
}

// Presence tells who listens (the MCP server implements it), for UIs that
// show people whether an agent will read what they write.
type Presence interface {
	// AgentStatus returns the status now. It does not block.
	AgentStatus() AgentStatus
	// PresenceChanged returns a channel that is closed at the next change
	// of the status.
	PresenceChanged() <-chan struct{}
}
