package serve

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// An agent of a protocol this build does not run fails the start, naming
// its section and why; the registry knows Claude Code's.
func TestAgentProtocols(t *testing.T) {
	work := t.TempDir()
	for _, tc := range []struct {
		cfg  config.Config
		want string
	}{
		{config.Config{Agent: config.Agent{Kind: config.AgentOpenCode, Workdir: work}},
			`[agent] kind "opencode" speaks the Agent Client Protocol, which this build of parley does not run yet (package mcp/acp)`},
		{config.Config{Agent: config.Agent{Kind: config.AgentClaudeCode, Workdir: work},
			Agents: map[string]*config.Agent{"codex": {Kind: config.AgentCodex}}},
			`[agents.codex] kind "codex" speaks the Agent Client Protocol`},
	} {
		m := &Main{Config: tc.cfg, Logger: slog.New(slog.DiscardHandler)}
		if _, _, err := m.newOrchestrator(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newOrchestrator: %v, want %q", err, tc.want)
		}
	}
	if _, ok := protocols[agentProtocol(config.Agent{Kind: config.AgentClaudeCode})]; !ok {
		t.Error("no driver for claude-code")
	}
	for _, kind := range []string{config.AgentACP, config.AgentOpenCode, config.AgentGemini, config.AgentCodex} {
		if p := agentProtocol(config.Agent{Kind: kind}); p != config.AgentACP {
			t.Errorf("kind %s speaks %s", kind, p)
		}
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
