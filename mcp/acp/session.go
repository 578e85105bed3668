package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/parley-chat/parley/mcp/agent"
)

// protocolVersion is the ACP version parley speaks
// (https://agentclientprotocol.com/protocol/initialization).
const protocolVersion = 1

// capabilities are what the agent said it can do in its initialize
// answer (https://agentclientprotocol.com/protocol/schema#agentcapabilities).
type capabilities struct {
	load   bool // session/load
	resume bool // session/resume: load without the replay
	close  bool // session/close
	http   bool // MCP servers over Streamable HTTP
	// login says how to log in, from the agent's authMethods, for the
	// Problem of a refused session.
	login string
}

// initialize does ACP's handshake: parley offers no client capabilities
// (no fs, no terminal: the agent reads, writes and runs commands itself).
func (p *agentProc) initialize(ctx context.Context) error {
	res, err := p.c.call(ctx, "initialize", map[string]any{
		"protocolVersion": protocolVersion,
		"clientCapabilities": map[string]any{
			"fs":       map[string]bool{"readTextFile": false, "writeTextFile": false},
			"terminal": false,
		},
	}, nil)
	if err != nil {
		return err
	}
	var r struct {
		ProtocolVersion   int `json:"protocolVersion"`
		AgentCapabilities struct {
			LoadSession     bool `json:"loadSession"`
			McpCapabilities struct {
				HTTP bool `json:"http"`
			} `json:"mcpCapabilities"`
			SessionCapabilities struct {
				Close  json.RawMessage `json:"close"`
				Resume json.RawMessage `json:"resume"`
			} `json:"sessionCapabilities"`
		} `json:"agentCapabilities"`
		AuthMethods []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"authMethods"`
		AgentInfo struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"agentInfo"`
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return fmt.Errorf("acp: initialize: %w", err)
	}
	if r.ProtocolVersion != protocolVersion {
		return &agent.Problem{
			Cause: fmt.Sprintf("the agent %s speaks ACP version %d; parley speaks version %d", p.d.opts.Name, r.ProtocolVersion, protocolVersion),
			Fix:   "use a release of the agent that speaks ACP version 1",
		}
	}
	ac := r.AgentCapabilities
	p.caps = capabilities{
		load:   ac.LoadSession,
		resume: offered(ac.SessionCapabilities.Resume),
		close:  offered(ac.SessionCapabilities.Close),
		http:   ac.McpCapabilities.HTTP,
	}
	var logins []string
	for _, m := range r.AuthMethods {
		if s := strings.TrimSpace(m.Description); s != "" {
			logins = append(logins, s)
		} else if m.Name != "" {
			logins = append(logins, m.Name)
		}
	}
	p.caps.login = strings.Join(logins, "; or ")
	p.d.log.Info("acp: initialized", "name", r.AgentInfo.Name, "version", r.AgentInfo.Version,
		"load", p.caps.load, "resume", p.caps.resume, "close", p.caps.close, "http", p.caps.http)
	return nil
}

// offered says whether a capability given as an object ({} when offered)
// is there.
func offered(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }

// sessionResult is what session/new, load and resume answer that parley
// uses: the session's id (new only) and its model, from the model config
// option (https://agentclientprotocol.com/protocol/session-config-options)
// or the older models field.
type sessionResult struct {
	SessionID     string `json:"sessionId"`
	ConfigOptions []struct {
		ID           string          `json:"id"`
		Category     string          `json:"category"`
		CurrentValue json.RawMessage `json:"currentValue"`
	} `json:"configOptions"`
	Models struct {
		CurrentModelID string `json:"currentModelId"`
	} `json:"models"`
}

func (r sessionResult) model() string {
	for _, o := range r.ConfigOptions {
		if o.Category == "model" || o.ID == "model" {
			var v string
			if json.Unmarshal(o.CurrentValue, &v) == nil {
				return v
			}
		}
	}
	return r.Models.CurrentModelID
}

// open opens the conversation req names on this process (see
// Driver.Start).
// release ends the conversation's use of the driver (see Driver.acquire).
func (p *agentProc) open(ctx context.Context, req agent.StartRequest, release func()) (agent.Conversation, error) {
	servers := mcpServers(req.Tools, p.caps.http)
	c := newConversation(p, release)
	if len(servers) > 0 {
		c.ownServer = toolsServer
	}
	if req.Conversation == "" {
		return p.newSession(ctx, c, servers)
	}
	id := req.Conversation
	c.id = id
	p.mu.Lock()
	switch {
	case p.ended:
		p.mu.Unlock()
		return nil, p.endedErr()
	case p.convs[id] != nil:
		p.mu.Unlock()
		return nil, fmt.Errorf("acp: conversation %s is already running", id)
	case p.opened[id]:
		// Stopped without session/close (the agent has none): it is
		// still open here, with its history.
		p.attach(c)
		p.mu.Unlock()
		return c, nil
	}
	var method string
	switch {
	case p.caps.resume && !p.d.noResume:
		method = "session/resume"
	case p.caps.load:
		method = "session/load"
	default:
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %s can neither resume nor load a session", agent.ErrNoConversation, p.d.opts.Name)
	}
	// Attached while loading, the session is taken; what the agent sends
	// of it until it answers is the history it replays (session/load),
	// which people saw already: c drops it.
	c.loading = true
	p.attach(c)
	p.mu.Unlock()
	params := map[string]any{"sessionId": id, "cwd": p.workdir, "mcpServers": servers}
	_, err := p.c.call(ctx, method, params, func(r reply) {
		// On the reader: whatever the agent sends after its answer is the
		// conversation's, not history.
		if r.err != nil {
			return
		}
		c.mu.Lock()
		c.loading = false
		c.model = decodeModel(r.result)
		c.mu.Unlock()
	})
	if err != nil {
		p.detach(c)
		var rerr *rpcError
		if errors.As(err, &rerr) {
			if rerr.Code == codeAuthRequired {
				return nil, p.authProblem(rerr)
			}
			// OpenCode 1.18.33 answers an unknown session with
			// -32603 "Internal error: OpenCode service failure".
			return nil, fmt.Errorf("%w: %s %s: %v", agent.ErrNoConversation, method, id, rerr)
		}
		return nil, err
	}
	return c, nil
}

// newSession does session/new; the conversation is attached on the reader
// as the answer comes, before any update of the session can.
func (p *agentProc) newSession(ctx context.Context, c *conversation, servers []any) (agent.Conversation, error) {
	_, err := p.c.call(ctx, "session/new", map[string]any{"cwd": p.workdir, "mcpServers": servers}, func(r reply) {
		if r.err != nil {
			return
		}
		var res sessionResult
		if json.Unmarshal(r.result, &res) != nil || res.SessionID == "" {
			return
		}
		c.mu.Lock()
		c.id, c.model = res.SessionID, res.model()
		c.mu.Unlock()
		p.mu.Lock()
		p.attach(c)
		p.mu.Unlock()
	})
	if err != nil {
		p.detach(c)
		var rerr *rpcError
		if errors.As(err, &rerr) && rerr.Code == codeAuthRequired {
			return nil, p.authProblem(rerr)
		}
		return nil, err
	}
	if c.ID() == "" {
		return nil, errors.New("acp: session/new answered no sessionId")
	}
	return c, nil
}

func decodeModel(raw json.RawMessage) string {
	var res sessionResult
	json.Unmarshal(raw, &res)
	return res.model()
}

// attach makes c the conversation of its session, under p.mu. A process
// that ended takes none: c ends with its error.
func (p *agentProc) attach(c *conversation) {
	if p.ended {
		go c.end(p.endedErr())
		return
	}
	if p.convs[c.id] == c {
		return
	}
	p.convs[c.id] = c
	p.opened[c.id] = true
}

// detach drops c from the process (a failed open): nothing of it was
// reported yet.
func (p *agentProc) detach(c *conversation) {
	p.mu.Lock()
	if c.id != "" && p.convs[c.id] == c {
		delete(p.convs, c.id)
	}
	p.mu.Unlock()
	c.discard()
}

// endedErr is why the process ended, for a call that came after.
func (p *agentProc) endedErr() error {
	if p.endErr != nil {
		return p.endErr
	}
	return errors.New("acp: the agent process was stopped")
}

// authProblem is the Problem of a session the agent refused for want of
// a login.
func (p *agentProc) authProblem(err error) error {
	fix := "log in to the agent as the user parley runs as"
	if p.caps.login != "" {
		fix = p.caps.login + " (as the user parley runs as)"
	}
	return &agent.Problem{Cause: fmt.Sprintf("the agent %s is not logged in", p.d.opts.Name), Fix: fix, Err: err}
}

// closeSession ends session id on the agent's side where it can
// (session/close); otherwise it stays open in the process, and a later
// Start of it attaches to it again.
func (p *agentProc) closeSession(ctx context.Context, id string) error {
	if !p.caps.close {
		return nil
	}
	_, err := p.c.call(ctx, "session/close", map[string]any{"sessionId": id}, nil)
	var rerr *rpcError
	if err == nil || errors.As(err, &rerr) {
		// Refused or done, it is not open as far as parley can tell.
		p.mu.Lock()
		delete(p.opened, id)
		p.mu.Unlock()
	}
	return err
}

// mcpServers is parley's MCP server as session/new's mcpServers
// (https://agentclientprotocol.com/protocol/session-setup#mcp-servers):
// Streamable HTTP with the credential as headers where the agent speaks
// it, else the stdio command with the credential in its environment.
func mcpServers(t agent.Tools, http bool) []any {
	switch {
	case t.URL != "" && http:
		names := make([]string, 0, len(t.Header))
		for k := range t.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		headers := make([]any, 0, len(names))
		for _, k := range names {
			headers = append(headers, map[string]string{"name": k, "value": t.Header[k]})
		}
		return []any{map[string]any{"type": "http", "name": toolsServer, "url": t.URL, "headers": headers}}
	case len(t.Stdio) > 0:
		env := make([]any, 0, len(t.StdioEnv))
		for _, kv := range t.StdioEnv {
			if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
				env = append(env, map[string]string{"name": k, "value": v})
			}
		}
		args := append([]string{}, t.Stdio[1:]...)
		return []any{map[string]any{"name": toolsServer, "command": t.Stdio[0], "args": args, "env": env}}
	}
	return []any{}
}

// toolsServer is the name parley's MCP server has for the agent.
const toolsServer = "parley"
