package serve

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/acp"
)

// Every kind the configuration takes has a driver in this build: Claude
// Code its own, the ACP kinds one ACP driver each, whose state directory
// is its own (a reap of Claude Code's never stops an ACP agent's process).
// Nothing is started by building them, and Close stops what they keep.
func TestAgentProtocols(t *testing.T) {
	work := t.TempDir()
	data := t.TempDir()
	cfg := config.Config{DataDir: data, Agent: config.Agent{Kind: config.AgentClaudeCode, Workdir: work},
		Agents: map[string]*config.Agent{"codex": {Kind: config.AgentCodex, Command: "codex-acp", Workdir: work},
			"oc": {Kind: config.AgentOpenCode, Command: "opencode", Args: []string{"acp"}, Workdir: work}}}
	m := &Main{Config: cfg, Logger: slog.New(slog.DiscardHandler)}
	for _, na := range cfg.RunAgents() {
		if err := AgentSupported(na.Name, na.Agent); err != nil {
			t.Errorf("%s: %v", na.Name, err)
		}
		d, err := protocols[agentProtocol(na.Agent)](m, na.Name, na.Agent, filepath.Join(data, na.Name))
		if err != nil {
			t.Fatalf("%s: %v", na.Name, err)
		}
		_, isACP := d.Driver.(*acp.Driver)
		if isACP != na.Agent.ACP() || (d.close != nil) != isACP {
			t.Errorf("%s (kind %s): driver %T, closer %v", na.Name, na.Agent.Kind, d.Driver, d.close != nil)
		}
		if d.close != nil {
			if err := d.close(); err != nil {
				t.Errorf("%s: close: %v", na.Name, err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(data, "agents")); !os.IsNotExist(err) {
		t.Errorf("building the drivers made their state: %v", err)
	}
	for _, kind := range []string{config.AgentACP, config.AgentOpenCode, config.AgentGemini, config.AgentCodex} {
		if p := agentProtocol(config.Agent{Kind: kind}); p != config.AgentACP {
			t.Errorf("kind %s speaks %s", kind, p)
		}
	}
	if err := AgentSupported("default", config.Agent{Kind: "goose"}); err == nil ||
		!strings.Contains(err.Error(), `[agent] kind "goose" is not`) {
		t.Errorf("an unknown kind: %v", err)
	}
}

// Agents are offered to people by name with their kind's title; a bare ACP
// agent by its name.
func TestCommandAgents(t *testing.T) {
	c := config.Config{Agent: config.Agent{Kind: config.AgentClaudeCode},
		Agents: map[string]*config.Agent{"goose": {Kind: config.AgentACP, Command: "goose"}, "codex": {Kind: config.AgentCodex}}}
	got := commandAgents(c)
	var s []string
	for _, a := range got {
		s = append(s, a.Name+"="+a.Title)
	}
	if strings.Join(s, " ") != "default=Claude Code codex=Codex goose=goose" {
		t.Fatalf("agents %q", s)
	}
	if commandAgents(config.Config{}) != nil {
		t.Fatal("agents offered when parley runs none")
	}
}

// With permissions = "allow" parley itself allows an ACP agent's prompts
// (its own settings leave them to the client); Claude Code's own settings
// decide, so a prompt it sends anyway stays denied. With "ask" people
// answer every agent's.
func TestAllowPrompts(t *testing.T) {
	work, data := t.TempDir(), t.TempDir()
	m := &Main{Config: config.Config{DataDir: data}, Logger: slog.New(slog.DiscardHandler)}
	for _, kind := range []string{config.AgentClaudeCode, config.AgentCodex, config.AgentOpenCode, config.AgentGemini, config.AgentACP} {
		for _, perms := range []string{config.PermissionsAsk, config.PermissionsAllow} {
			a := config.Agent{Kind: kind, Command: "agent", Workdir: work, Permissions: perms}
			d, err := protocols[agentProtocol(a)](m, kind, a, filepath.Join(data, kind+perms))
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			if want := a.ACP() && perms == config.PermissionsAllow; d.allowPrompts != want {
				t.Errorf("kind %s, permissions %s: allowPrompts %v, want %v", kind, perms, d.allowPrompts, want)
			}
			if d.close != nil {
				d.close()
			}
		}
	}
}
