package serve

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/acp"
	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/claudecode"
	"github.com/parley-chat/parley/mcp/orchestrator"
)

// agentDir is where the agents parley runs keep their pidfiles and
// temporary directories, under the data directory: the default agent's
// there, a named agent's in agentDir/named/NAME.
const agentDir = "agents"

// driver is what one configured agent runs on: its Driver, and what a
// previous run of it may have left running.
type driver struct {
	agent.Driver
	// reapStale stops what a crashed parley left of this agent; nil when
	// there is nothing to look for (an ACP Driver reaps at its process's
	// start).
	reapStale func() (int, error)
	// close stops what the driver keeps running beyond its conversations
	// (an ACP agent's one process), once the orchestrator has stopped;
	// nil when nothing.
	close func() error
	// allowPrompts: parley allows the agent's permission prompts itself,
	// recording that it did (orchestrator.Agent.AllowPermissions) — an
	// ACP agent under permissions = "allow", whose prompts are its
	// client's to answer. Claude Code under "allow" decides by its own
	// settings and prompts for nothing: one that arrives is denied.
	allowPrompts bool
}

// protocol builds the driver of one agent of its protocol: name is the
// agent's name, stateDir its own directory.
type protocol func(m *Main, name string, a config.Agent, stateDir string) (driver, error)

// protocols are the agent protocols this build runs, by protocol
// (agentProtocol): adding one is one entry.
var protocols = map[string]protocol{
	config.AgentClaudeCode: claudeCodeDriver,
	config.AgentACP:        acpDriver,
}

// AgentSupported says whether this build runs the agent name (a): nil, or
// why not (its protocol has no driver here), naming its section — what
// the start fails with, and parley doctor says.
func AgentSupported(name string, a config.Agent) error {
	if _, ok := protocols[agentProtocol(a)]; ok {
		return nil
	}
	return fmt.Errorf("%s kind %q is not an agent protocol this build of parley runs", agentSection(name), a.Kind)
}

// agentProtocol is the protocol of a's kind: the ACP kinds are all "acp".
func agentProtocol(a config.Agent) string {
	if a.ACP() {
		return config.AgentACP
	}
	return a.Kind
}

// kindTitles are the agents as people read them in notices.
var kindTitles = map[string]string{
	config.AgentClaudeCode: "Claude Code",
	config.AgentOpenCode:   "OpenCode",
	config.AgentGemini:     "Gemini CLI",
	config.AgentCodex:      "Codex",
}

// agentTitle is a's title: its kind's, or for a bare ACP agent its name.
func agentTitle(name string, a config.Agent) string {
	if t, ok := kindTitles[a.Kind]; ok {
		return t
	}
	return name
}

// claudeCodeDriver runs kind "claude-code": a Runner of Claude Code
// processes and its Driver.
func claudeCodeDriver(m *Main, name string, a config.Agent, stateDir string) (driver, error) {
	runner := claudecode.NewRunner(claudecode.Options{
		Command:        a.Command,
		Args:           a.Args,
		Workdir:        a.Workdir,
		CommandKey:     config.AgentKey(name, "command"),
		ExtraEnv:       a.Env,
		StateDir:       stateDir,
		AskPermissions: a.Permissions == config.PermissionsAsk,
		Logger:         m.Logger.With("component", "agent", "agent", name),
	})
	return driver{Driver: claudecode.NewDriver(runner), reapStale: runner.ReapStale}, nil
}

// InstallHints say how to install each kind's command: for the notice of
// a missing one at a session's first message, and parley doctor's.
var InstallHints = map[string]string{
	config.AgentClaudeCode: "install Claude Code: npm install -g @anthropic-ai/claude-code",
	config.AgentOpenCode:   "install OpenCode: npm install -g opencode-ai",
	config.AgentGemini:     "install Gemini CLI: npm install -g @google/gemini-cli",
	config.AgentCodex:      "install Codex's ACP agent: npm install -g @zed-industries/codex-acp",
	config.AgentACP:        "install the agent",
}

// acpDriver runs the ACP kinds: one agent process for every session of
// the agent (package acp). StateDir is the agent's own, apart from
// Claude Code's, so that one's reaping never stops the other's process.
func acpDriver(m *Main, name string, a config.Agent, stateDir string) (driver, error) {
	d := acp.New(acp.Options{
		Name:       agentTitle(name, a),
		Command:    a.Command,
		Args:       a.Args,
		Install:    InstallHints[a.Kind],
		CommandKey: config.AgentKey(name, "command"),
		Workdir:    a.Workdir,
		ExtraEnv:   a.Env,
		StateDir:   filepath.Join(stateDir, "acp"),
		Logger:     m.Logger.With("component", "agent", "agent", name),
	})
	return driver{Driver: d, close: d.Close, allowPrompts: a.Permissions == config.PermissionsAllow}, nil
}

// commandAgents are the agents parley runs, as the command service tells
// people of them.
func commandAgents(c config.Config) []commands.Agent {
	var out []commands.Agent
	for _, na := range c.RunAgents() {
		out = append(out, commands.Agent{Name: na.Name, Title: agentTitle(na.Name, na.Agent)})
	}
	return out
}

// webAgents are the agents parley runs, as the page offers them.
func webAgents(c config.Config) []web.Agent {
	var out []web.Agent
	for _, a := range commandAgents(c) {
		out = append(out, web.Agent{Name: a.Name, Title: a.Title})
	}
	return out
}

// newOrchestrator builds what runs the configured agents: a driver of each
// (protocols), and the orchestrator that drives each session with its
// agent as a client of this daemon's own /mcp (reached on loopback, with
// the token when one is set, and the MCP server's own-client secret). Each
// agent it runs gets this daemon's MCP server, bound to its session by the
// session's credential (mcp.AgentToken). It returns nil when parley runs
// no agent, and the drivers' reapers of what a previous run left; the
// drivers' closers are kept in m.agentClosers for Run's end.
func (m *Main) newOrchestrator() (*orchestrator.Orchestrator, []func() (int, error), error) {
	run := m.Config.RunAgents()
	if len(run) == 0 {
		return nil, nil, nil
	}
	agents := map[string]orchestrator.Agent{}
	var reapers []func() (int, error)
	fail := func(err error) (*orchestrator.Orchestrator, []func() (int, error), error) {
		m.closeAgents()
		return nil, nil, err
	}
	for _, na := range run {
		if err := AgentSupported(na.Name, na.Agent); err != nil {
			return fail(err)
		}
		build := protocols[agentProtocol(na.Agent)]
		stateDir := filepath.Join(m.Config.DataDir, agentDir)
		key := ""
		if na.Name != config.DefaultAgentName {
			stateDir, key = filepath.Join(stateDir, "named", na.Name), na.Name
		}
		d, err := build(m, na.Name, na.Agent, stateDir)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", agentSection(na.Name), err))
		}
		if d.reapStale != nil {
			reapers = append(reapers, d.reapStale)
		}
		if d.close != nil {
			m.agentClosers = append(m.agentClosers, d.close)
		}
		agents[key] = orchestrator.Agent{Driver: d.Driver, Title: agentTitle(na.Name, na.Agent), Kind: na.Agent.Kind,
			AskPermissions: na.Agent.Permissions == config.PermissionsAsk, AllowPermissions: d.allowPrompts}
	}
	header := http.Header{}
	if t := m.Config.HTTP.Token; t != "" {
		header.Set("Authorization", "Bearer "+t)
	}
	// The MCP server knows its own orchestrator by this secret, and never
	// ends its session to make room for other agents.
	header.Set(m.mcp.OwnClientHeader())
	endpoint := "http://" + loopbackAddr(m.http.Addr()) + "/mcp"
	o, err := orchestrator.New(orchestrator.Options{
		Endpoint:   endpoint,
		Header:     header,
		Agents:     agents,
		Tools:      m.agentTools(endpoint),
		MaxRunning: int(m.Config.Agent.MaxRunning),
		Leases:     m.daemon.AgentLeases(),
		Logger:     m.Logger.With("component", "orchestrator"),
	})
	if err != nil {
		return fail(err)
	}
	return o, reapers, nil
}

// closeAgents stops what the agents' drivers keep running (their
// processes), once no conversation runs on them.
func (m *Main) closeAgents() {
	for _, c := range m.agentClosers {
		if err := c(); err != nil {
			m.Logger.Warn("stopping an agent failed", "err", err)
		}
	}
	m.agentClosers = nil
}

// agentTools is how the agent of a session reaches this daemon's MCP
// server: the endpoint with the session's credential as a header, or this
// binary's stdio proxy with it in the environment.
func (m *Main) agentTools(endpoint string) func(session string) agent.Tools {
	exe, err := os.Executable()
	if err != nil {
		exe = "parley"
	}
	return func(session string) agent.Tools {
		tok := m.mcp.AgentToken(core.SessionID(session))
		return agent.Tools{
			URL:      endpoint,
			Header:   map[string]string{mcp.AgentTokenHeader: tok},
			Stdio:    []string{exe, "mcp", "--session", session, "--url", endpoint},
			StdioEnv: []string{mcp.AgentTokenEnv + "=" + tok},
		}
	}
}

// agentSection is the configuration section of the agent name.
func agentSection(name string) string {
	if name == config.DefaultAgentName {
		return "[agent]"
	}
	return "[agents." + name + "]"
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
