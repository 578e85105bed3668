package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// binding is the session a connection is bound to. A 2025-11-25
// connection's is fixed when it initializes (guard refuses a later request
// naming another); a 2026-07-28 request has no connection, so its own URL
// and headers are its binding, and a listen stream's are fixed when it
// opens.
type binding struct {
	id     core.SessionID
	source string // "?session=" or the header, for error messages
	err    error
	// agent marks a request carrying an agent's credential (agentauth.go).
	agent bool
}

// same reports whether b names the same session as fixed.
func (b binding) same(fixed binding) bool {
	return b.err == nil && fixed.err == nil && b.id == fixed.id
}

type bindingKey struct{}

// requestBinding is the binding r's URL and headers name; an agent's
// credential binds to its own session (agentauth.go).
func (s *Server) requestBinding(r *http.Request) binding {
	b := urlBinding(r)
	if tok := r.Header.Get(AgentTokenHeader); tok != "" {
		b = s.agentBinding(tok, b)
	}
	return b
}

// urlBinding is the binding r's URL and Parley-Session header name.
func urlBinding(r *http.Request) binding {
	q := r.URL.Query().Get(SessionParam)
	h := r.Header.Get(SessionHeader)
	switch {
	case q != "" && h != "" && q != h:
		return binding{err: fmt.Errorf("?%s=%s and header %s: %s name different sessions", SessionParam, q, SessionHeader, h)}
	case q != "":
		return binding{id: core.SessionID(q), source: "?" + SessionParam + "="}
	case h != "":
		return binding{id: core.SessionID(h), source: "header " + SessionHeader}
	}
	return binding{}
}

func bindingFrom(ctx context.Context) binding {
	b, _ := ctx.Value(bindingKey{}).(binding)
	return b
}

// checkRequest runs before every request (both protocol generations): a
// connection bound to an unknown session fails on its first request with
// a message that says why, and subscriptions to URIs that can never be
// notified are refused instead of silently accepted.
func (s *Server) checkRequest(ctx context.Context, _ any, message any) error {
	b := bindingFrom(ctx)
	if b.err != nil {
		return fmt.Errorf("parley: %w", b.err)
	}
	if b.id != "" {
		if err := s.checkSession(ctx, b.id); err != nil {
			return fmt.Errorf("parley: this connection is bound to session %s by %s: %w", b.id, b.source, err)
		}
	}
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var req struct {
		Method mcp.MCPMethod `json:"method"`
		Params struct {
			URI           string                 `json:"uri"`
			Notifications mcp.SubscriptionFilter `json:"notifications"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &req) != nil {
		return nil // mcp-go reports malformed requests itself
	}
	var uris []string
	switch req.Method {
	case mcp.MethodResourcesSubscribe:
		uris = []string{req.Params.URI}
	case mcp.MethodSubscriptionsListen:
		uris = req.Params.Notifications.ResourceSubscriptions
	}
	for _, uri := range uris {
		if _, err := s.scopeOf(ctx, uri); err != nil {
			return fmt.Errorf("parley: cannot subscribe to %q: %w", uri, err)
		}
	}
	return nil
}

// errUnknownSession is wrapped by checkSession for ids that name no session.
var errUnknownSession = errors.New("unknown session")

// checkSession reports whether id names a stored session.
func (s *Server) checkSession(ctx context.Context, id core.SessionID) error {
	if _, ok := s.known.Load(id); ok {
		return nil
	}
	if !core.ValidID(string(id)) {
		return fmt.Errorf("%w %q (not a parley session id; session.list shows them)", errUnknownSession, id)
	}
	if _, err := s.opts.Store.Session(ctx, id); err != nil {
		if errors.Is(err, core.ErrNotFound) {
			return fmt.Errorf("%w %s (session.list shows the sessions)", errUnknownSession, id)
		}
		return fmt.Errorf("looking up session %s: %w", id, err)
	}
	s.known.Store(id, struct{}{})
	return nil
}

// sessionFor picks the session a tool call is about: the connection's
// binding (a session_id naming another session is refused: a bound
// connection acts on its session only), else its session_id argument.
// With neither, required tools fail with a message naming the ways to give
// one; the others get "" (all sessions or none).
func (s *Server) sessionFor(ctx context.Context, tool, arg string, required bool) (core.SessionID, error) {
	id := core.SessionID(arg)
	if b := bindingFrom(ctx); b.id != "" {
		if id != "" && id != b.id {
			return "", toolError(fmt.Sprintf("%s: this connection is bound to session %s by %s and acts on that session only; "+
				"omit session_id, or use a connection bound to %s (or an unbound one)", tool, b.id, b.source, id))
		}
		id = b.id
	}
	if id == "" {
		if required {
			return "", toolError(fmt.Sprintf("%s needs session_id: this connection is not bound to a session "+
				"(pass session_id, or connect with /mcp?%s=ID or the %s header)", tool, SessionParam, SessionHeader))
		}
		return "", nil
	}
	if err := s.checkSession(ctx, id); err != nil {
		return "", err
	}
	return id, nil
}

// errBoundElsewhere is the refusal of another session's resource on a bound
// connection.
func errBoundElsewhere(b binding, other core.SessionID) error {
	return fmt.Errorf("this connection is bound to session %s by %s and reads that session only, not %s; "+
		"use %s, or a connection bound to %s (or an unbound one)", b.id, b.source, other, InboxURI, other)
}
