package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/parley-chat/parley/core"
)

// Inbox resource URIs.
const (
	// InboxURI is the inbox of the connection's session, or of every
	// session on an unbound connection.
	InboxURI = "ui://chat/inbox"
	// SessionInboxTemplate addresses one session's inbox.
	SessionInboxTemplate = "ui://chat/sessions/{session_id}/inbox"

	sessionInboxPrefix = "ui://chat/sessions/"
	sessionInboxSuffix = "/inbox"
	inboxMime          = "application/json"
	// inboxLatest is how many of the newest messages the resource shows;
	// older ones are read with chat_read_since.
	inboxLatest = 100
)

// SessionInboxURI is the URI of one session's inbox.
func SessionInboxURI(id core.SessionID) string {
	return sessionInboxPrefix + string(id) + sessionInboxSuffix
}

// scopeOf maps an inbox URI to the sessions it covers: one session, or ""
// for all of them (ui://chat/inbox on an unbound connection).
func (s *Server) scopeOf(ctx context.Context, uri string) (core.SessionID, error) {
	if uri == InboxURI {
		id := bindingFrom(ctx).id
		if id != "" {
			if err := s.checkSession(ctx, id); err != nil {
				return "", err
			}
		}
		return id, nil
	}
	if rest, ok := strings.CutPrefix(uri, sessionInboxPrefix); ok {
		if id, ok := strings.CutSuffix(rest, sessionInboxSuffix); ok && id != "" && !strings.Contains(id, "/") {
			if b := bindingFrom(ctx); b.id != "" && b.id != core.SessionID(id) {
				return "", errBoundElsewhere(b, core.SessionID(id))
			}
			if err := s.checkSession(ctx, core.SessionID(id)); err != nil {
				return "", err
			}
			return core.SessionID(id), nil
		}
	}
	return "", fmt.Errorf("unknown resource %q: parley serves %s and %s", uri, InboxURI, SessionInboxTemplate)
}

// InboxMessage is an inbox message as agents see it: in the inbox
// resource, chat_read_since's result and notifications. Runtimes that read
// the inbox as clients (the orchestrator, the channel) decode it so.
type InboxMessage struct {
	ID          core.MessageID    `json:"id"`
	TS          time.Time         `json:"ts"`
	Author      core.Role         `json:"author"`
	Mime        string            `json:"mime"`
	Content     string            `json:"content"`
	SessionID   core.SessionID    `json:"session_id"`
	Origin      core.Origin       `json:"origin,omitempty"`
	Actor       string            `json:"actor,omitempty"`
	Attachments []core.Attachment `json:"attachments,omitempty"`
}

func toWire(m core.Message) InboxMessage {
	actor := m.Actor.Name
	if actor == "" {
		actor = m.Actor.ID
	}
	return InboxMessage{ID: m.ID, TS: m.Time, Author: m.Role, Mime: m.Mime, Content: m.Content,
		SessionID: m.Session, Origin: m.Origin, Actor: actor, Attachments: m.Attachments}
}

func toWireAll(ms []core.Message) []InboxMessage {
	out := make([]InboxMessage, len(ms))
	for i, m := range ms {
		out[i] = toWire(m)
	}
	return out
}

// InboxPage is the inbox resource's JSON body and chat_read_since's
// result: the messages and the id to read after next.
type InboxPage struct {
	LastID   core.MessageID `json:"last_id"`
	Messages []InboxMessage `json:"messages"`
}

func (s *Server) addResources() {
	s.mcp.AddResource(mcp.NewResource(InboxURI, "inbox",
		mcp.WithResourceTitle("Chat inbox"),
		mcp.WithResourceDescription("The newest messages (up to 100) of this connection's session, or of all sessions when the connection is not bound to one. "+
			"Subscribe to be notified of new human messages; read older ones with chat_read_since."),
		mcp.WithMIMEType(inboxMime),
	), s.readInbox)
	s.mcp.AddResourceTemplate(mcp.NewResourceTemplate(SessionInboxTemplate, "session inbox",
		mcp.WithTemplateTitle("One session's inbox"),
		mcp.WithTemplateDescription("The newest messages (up to 100) of one session."),
		mcp.WithTemplateMIMEType(inboxMime),
	), s.readInbox)
}

var _ server.ResourceHandlerFunc = (*Server)(nil).readInbox

func (s *Server) readInbox(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	uri := req.Params.URI
	scope, err := s.scopeOf(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	msgs, err := s.latest(ctx, scope, inboxLatest)
	if err != nil {
		return nil, fmt.Errorf("parley: reading the inbox: %w", err)
	}
	body := InboxPage{Messages: toWireAll(msgs)}
	if len(msgs) > 0 {
		body.LastID = msgs[len(msgs)-1].ID
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("parley: %w", err)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: inboxMime, Text: string(b)}}, nil
}

// latest returns the newest n messages of scope, oldest first.
func (s *Server) latest(ctx context.Context, scope core.SessionID, n int) ([]core.Message, error) {
	return s.opts.Store.InboxTail(ctx, scope, n)
}
