package mcp

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// The credential of an agent parley runs (the orchestrator hands each
// session's agent this server, bound to the session: agent.Tools).
//
// It is "ID.MAC": the session's id and HMAC-SHA256 of it under a key New
// draws at random, unpadded base64url — no table to keep, and nothing
// that outlives the daemon (the agents it ran end with it). A request to
// /mcp carrying it (AgentTokenHeader) is admitted without the [http]
// token (cmd's HTTP guard asks AgentAuthorized; the MAC is compared in
// constant time) and is bound to that session whatever its URL says: a
// ?session= or Parley-Session naming another is refused, so the
// credential reaches one session only, and never /api, which it does not
// open. It opens a part of the tools too (agentTools): reading the
// session, posting the agent's messages and files, asking questions,
// setting the title. What the orchestrator does for the session's turn —
// its output, its tool calls, its approvals, its state, yielding — and
// what only people do — posting as a person, closing — is refused, so
// that a prompt-injected agent cannot resume another session's
// conversation through the orchestrator's state, speak for people, or end
// its own turn; and, as for every MCP client, nothing it posts answers an
// approval.

// AgentTokenHeader carries an agent's credential (AgentToken).
const AgentTokenHeader = "Parley-Agent-Token"

// AgentTokenEnv is the variable the stdio proxy (`parley mcp --session`)
// reads an agent's credential from.
const AgentTokenEnv = "PARLEY_SESSION_TOKEN"

// agentTokenContext is what the MAC covers besides the session id, so that
// the key signs nothing else by accident.
const agentTokenContext = "parley agent tools\x00"

// agentTools are the tools a request with an agent's credential may call
// (and sees listed), by their dotted names.
var agentTools = []string{"chat_read_since", "chat.assistant.post", "ui.ask", "session.get", "session.list", "session.rename"}

func newAgentKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// AgentToken is the credential of the agent parley runs for session: it
// admits that session's binding on /mcp and nothing else. A secret: never
// logged.
func (s *Server) AgentToken(session core.SessionID) string {
	return string(session) + "." + s.agentMAC(session)
}

func (s *Server) agentMAC(session core.SessionID) string {
	m := hmac.New(sha256.New, s.agentKey)
	m.Write([]byte(agentTokenContext + string(session)))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// agentTokenSession is the session credential tok admits; ok is false when
// it is none of this server's.
func (s *Server) agentTokenSession(tok string) (core.SessionID, bool) {
	id, mac, ok := strings.Cut(tok, ".")
	if !ok || !core.ValidID(id) {
		return "", false
	}
	return core.SessionID(id), hmac.Equal([]byte(mac), []byte(s.agentMAC(core.SessionID(id))))
}

// AgentAuthorized reports whether r carries a valid agent credential:
// cmd's HTTP guard admits such a request to /mcp without the [http]
// token, and the binding it implies does the rest.
func (s *Server) AgentAuthorized(r *http.Request) bool {
	_, ok := s.agentTokenSession(r.Header.Get(AgentTokenHeader))
	return ok
}

// agentBinding is the binding of a request carrying an agent's
// credential tok: the credential's session, which the URL and header may
// name too, but no other.
func (s *Server) agentBinding(tok string, named binding) binding {
	id, ok := s.agentTokenSession(tok)
	switch {
	case !ok:
		return binding{err: fmt.Errorf("header %s is no credential of this parley (an agent's credential lasts as long as the daemon that gave it)", AgentTokenHeader)}
	case named.err != nil:
		return named
	case named.id != "" && named.id != id:
		return binding{err: fmt.Errorf("header %s is session %s's, and the request names session %s by %s", AgentTokenHeader, id, named.id, named.source)}
	}
	return binding{id: id, source: "its agent credential", agent: true}
}

// agentAllowed reports whether tool (dotted or underscored) may be called
// on ctx's request.
func agentAllowed(ctx context.Context, tool string) bool {
	if !bindingFrom(ctx).agent {
		return true
	}
	return slices.ContainsFunc(agentTools, func(t string) bool { return t == tool || strings.ReplaceAll(t, ".", "_") == tool })
}

// agentToolFilter is the tools an agent's credential sees and may call:
// each of agentTools once, by its underscore name (mcp-go answers a call
// of any other "tool not found", a dotted name too). Once because model APIs take tool names of [a-zA-Z0-9_-] only
// (https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use,
// https://platform.openai.com/docs/api-reference/responses/create), so an
// agent turns the dots into underscores: Codex (codex-acp 0.16.0) then
// offered its model both as chat_assistant_post_<hash>, twice each under
// names no model could guess, and refused the plain name.
func agentToolFilter(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	if !bindingFrom(ctx).agent {
		return tools
	}
	out := make([]mcp.Tool, 0, len(agentTools))
	for _, t := range tools {
		if !strings.Contains(t.Name, ".") && agentAllowed(ctx, t.Name) {
			out = append(out, t)
		}
	}
	return out
}
