package serve

import (
	"net"
	"net/http"
	"path/filepath"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/claudecode"
	"github.com/parley-chat/parley/mcp/orchestrator"
)

// agentDir is where the agents parley runs keep their pidfiles and
// temporary directories, under the data directory.
const agentDir = "agents"

// newOrchestrator builds what runs [agent] kind = "claude-code": a Runner
// of Claude Code processes, and the orchestrator that drives one per
// session as a client of this daemon's own /mcp (reached on loopback, with
// the token when one is set, and the MCP server's own-client secret). It
// returns nil when parley runs no agent.
func (m *Main) newOrchestrator() (*orchestrator.Orchestrator, *claudecode.Runner, error) {
	a := m.Config.Agent
	if !a.Enabled() {
		return nil, nil, nil
	}
	runner := claudecode.NewRunner(claudecode.Options{
		Command:        a.Command,
		Args:           a.Args,
		Workdir:        a.Workdir,
		ExtraEnv:       a.Env,
		StateDir:       filepath.Join(m.Config.DataDir, agentDir),
		AskPermissions: a.Permissions == config.PermissionsAsk,
		Logger:         m.Logger.With("component", "agent"),
	})
	header := http.Header{}
	if t := m.Config.HTTP.Token; t != "" {
		header.Set("Authorization", "Bearer "+t)
	}
	// The MCP server knows its own orchestrator by this secret, and never
	// ends its session to make room for other agents.
	header.Set(m.mcp.OwnClientHeader())
	o, err := orchestrator.New(orchestrator.Options{
		Endpoint: "http://" + loopbackAddr(m.http.Addr()) + "/mcp",
		Header:   header,
		Agents: map[string]orchestrator.Agent{"": {Driver: claudecode.NewDriver(runner), Title: "Claude Code",
			Kind: a.Kind, AskPermissions: a.Permissions == config.PermissionsAsk}},
		MaxRunning: int(a.MaxRunning),
		Leases:     m.daemon.AgentLeases(),
		Logger:     m.Logger.With("component", "orchestrator"),
	})
	if err != nil {
		return nil, nil, err
	}
	return o, runner, nil
}

// loopbackAddr is how this machine reaches a listen address: the same
// port on 127.0.0.1 when the listener takes every address.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
