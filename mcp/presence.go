package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// Agent presence. The registry of subscriptions (notify.go) is what says
// whether an agent listens to a session: a connection subscribed to the
// session's inbox, or to the inbox of all sessions, will be notified of
// what people write there. The Server is a core.Presence over it, read by
// the web page, and serves it to agents as the ui://agent/status resource.
//
// When a person writes (a human message from a UI platform) to a session
// nobody listens to, the Server asks the Handler for one short notice to
// that person's platform (Options.NoAgentNotice): the message is kept and
// will be read when an agent connects. It is an ordinary notice, with the
// next_notice lifetime, so the next notice or the start of output deletes
// it; each such message gets its own, which replaces the one before.

// AgentStatusURI is the resource that says which sessions have an agent
// listening.
const AgentStatusURI = "ui://agent/status"

// DefaultNoAgentNotice is the notice a person gets for a message to a
// session no agent listens to.
const DefaultNoAgentNotice = "📭 No agent is connected to this session yet. Your message is kept and will be read when an agent connects."

// noticeTimeout bounds storing one no-agent notice.
const noticeTimeout = 5 * time.Second

var _ core.Presence = (*Server)(nil)

// movedLocked tells the watchers of presence that the scopes changed; the
// caller holds r.mu for writing.
func (r *registry) movedLocked() {
	if r.moved != nil {
		close(r.moved)
		r.moved = nil
	}
}

// changed returns a channel closed at the next change of the scopes.
func (r *registry) changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.moved == nil {
		r.moved = make(chan struct{})
	}
	return r.moved
}

// listeners counts the connections listening to all sessions and to each
// session, of those whose client can hear now (conns.go).
func (r *registry) listeners() (all int, sessions map[core.SessionID]int) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	sessions = map[core.SessionID]int{}
	for scope, subs := range r.scopes {
		n := 0
		for sub := range subs {
			if r.live == nil || r.live(sub.key) {
				n++
			}
		}
		switch {
		case n == 0:
		case scope == "":
			all = n
		default:
			sessions[scope] = n
		}
	}
	return all, sessions
}

// AgentStatus implements core.Presence.
func (s *Server) AgentStatus() core.AgentStatus {
	all, sessions := s.subs.listeners()
	return core.AgentStatus{Ready: s.ready.Load(), All: all, Sessions: sessions}
}

// PresenceChanged implements core.Presence. Readiness changes only at
// start and stop, which a page learns by its stream ending.
func (s *Server) PresenceChanged() <-chan struct{} { return s.subs.changed() }

// statusBody is the ui://agent/status resource.
type statusBody struct {
	Ready bool `json:"ready"`
	// AllSessions is the number of connections listening to every
	// session's inbox; when it is not 0, every session has an agent.
	AllSessions int `json:"all_sessions"`
	// Sessions lists the sessions an agent listens to by their own inbox
	// (on a bound connection, only its own session).
	Sessions []sessionListeners `json:"sessions"`
	// Agents is the number of agents connected, listening or not.
	Agents int `json:"agents"`
	// Session is this connection's session, when it is bound to one.
	Session *sessionListeners `json:"session,omitempty"`
}

type sessionListeners struct {
	SessionID core.SessionID `json:"session_id"`
	Listeners int            `json:"listeners"`
	// Listening is true when an agent will read the session's new
	// messages (its own inbox or all sessions').
	Listening bool `json:"listening"`
}

func (s *Server) addStatusResource() {
	s.mcp.AddResource(mcp.NewResource(AgentStatusURI, "agent status",
		mcp.WithResourceTitle("Agent presence"),
		mcp.WithResourceDescription("Whether parley's chat server is ready and which sessions have an agent listening "+
			"(subscribed to the session's inbox, or to the inbox of all sessions)."),
		mcp.WithMIMEType(inboxMime),
	), s.readStatus)
}

func (s *Server) readStatus(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	st := s.AgentStatus()
	body := statusBody{Ready: st.Ready, AllSessions: st.All, Sessions: []sessionListeners{}, Agents: s.Agents()}
	bound := bindingFrom(ctx).id
	for id, n := range st.Sessions {
		if bound != "" && id != bound {
			continue // a bound connection learns about its own session only
		}
		body.Sessions = append(body.Sessions, sessionListeners{SessionID: id, Listeners: n, Listening: st.Listening(id)})
	}
	slices.SortFunc(body.Sessions, func(a, b sessionListeners) int { return strings.Compare(string(a.SessionID), string(b.SessionID)) })
	if id := bound; id != "" {
		body.Session = &sessionListeners{SessionID: id, Listeners: st.Sessions[id] + st.All, Listening: st.Listening(id)}
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: req.Params.URI, MIMEType: inboxMime, Text: string(b)}}, nil
}

// presenceBox holds the Presence set by SetNoticePresence.
type presenceBox struct{ p core.Presence }

// SetNoticePresence makes p decide whether an agent listens when a person
// writes (the no-agent notice): among instances sharing a store, the
// presence of them all (store/follow.Presence), since the agent may be
// connected to another. Call it before Run.
func (s *Server) SetNoticePresence(p core.Presence) { s.presence.Store(&presenceBox{p}) }

// noticePresence is the presence the no-agent notice is decided by.
func (s *Server) noticePresence() core.Presence {
	if b := s.presence.Load(); b != nil {
		return b.p
	}
	return s
}

// noAgentNotice tells the person who wrote e, a human message, that no
// agent listens to its session, if none does.
func (s *Server) noAgentNotice(ctx context.Context, e core.Event) {
	text := s.opts.NoAgentNotice
	if text == "" || e.Message == nil || !e.Origin.IsUI() || e.Message.Mime == core.MimeControl ||
		slices.Contains(s.opts.NoAgentNoticeSkip, e.Origin) || s.noticePresence().AgentStatus().Listening(e.Session) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), noticeTimeout)
	defer cancel()
	// For the person who wrote, whom the origin's allow-list admits.
	_, err := s.opts.Handler.Handle(ctx, core.Command{Kind: core.Notice, Session: e.Session, Origin: e.Origin,
		Actor: e.Message.Actor, Text: text})
	if err != nil {
		s.log.Warn("could not tell a person that no agent listens", "session", e.Session, "origin", e.Origin, "err", err)
	}
}
