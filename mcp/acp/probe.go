package acp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Info is what an agent said of itself in its answer to initialize
// (https://agentclientprotocol.com/protocol/initialization).
type Info struct {
	// Name and Version are the agent's agentInfo; empty where it gives
	// none (agentInfo is optional).
	Name    string
	Version string
	// ProtocolVersion is the ACP version the agent answered with.
	ProtocolVersion int
	// LoadSession: it offers session/load, so a conversation continues
	// after parley restarts; Resume and Close: session/resume and
	// session/close.
	LoadSession bool
	Resume      bool
	Close       bool
	// MCPHTTP: it takes MCP servers over Streamable HTTP
	// (mcpCapabilities.http), so parley's tools reach it by URL rather
	// than by a stdio proxy.
	MCPHTTP bool
	// Login says how to log the agent in, from its authMethods; "" when
	// it names none.
	Login string
}

// Probe starts the agent as a Driver would — the same command line,
// environment, process group and TMPDIR under opts.StateDir — does
// initialize, and stops the process group: no session, no model call. It
// returns what the agent answered, or the *agent.Problem its start would
// be (the command missing, exiting at once, not answering initialize
// within opts.CallTimeout, refusing it, speaking another ACP version).
//
// opts.StateDir should be a directory of the probe's own: as at any start,
// a process a previous run left recorded there is stopped first. The
// probe waits for the start to end even when ctx ends first, so that no
// process outlives it; opts.CallTimeout bounds that wait.
func Probe(ctx context.Context, opts Options) (Info, error) {
	opts.IdleTimeout = -1
	d := New(opts)
	var mu sync.Mutex
	var answer []byte
	// The first response on the connection answers initialize, the only
	// request sent.
	d.lineRead = func(line []byte) {
		mu.Lock()
		defer mu.Unlock()
		if answer == nil && isResponse(line) {
			answer = bytes.Clone(line)
		}
	}
	defer d.Close()
	p, err := d.process(context.WithoutCancel(ctx))
	if err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	info := Info{LoadSession: p.caps.load, Resume: p.caps.resume, Close: p.caps.close,
		MCPHTTP: p.caps.http, Login: p.caps.login}
	mu.Lock()
	defer mu.Unlock()
	var m struct {
		Result struct {
			ProtocolVersion int `json:"protocolVersion"`
			AgentInfo       struct {
				Name    string `json:"name"`
				Title   string `json:"title"`
				Version string `json:"version"`
			} `json:"agentInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal(answer, &m); err != nil {
		return Info{}, fmt.Errorf("acp: initialize's answer: %w", err)
	}
	info.ProtocolVersion = m.Result.ProtocolVersion
	info.Name, info.Version = m.Result.AgentInfo.Name, m.Result.AgentInfo.Version
	if info.Name == "" {
		info.Name = m.Result.AgentInfo.Title
	}
	return info, nil
}

// isResponse says whether line is a JSON-RPC response: an id and a result
// or error, no method.
func isResponse(line []byte) bool {
	var m message
	if json.Unmarshal(line, &m) != nil {
		return false
	}
	return len(m.ID) > 0 && m.Method == "" && (m.Result != nil || m.Error != nil)
}
