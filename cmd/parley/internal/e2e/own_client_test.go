package e2e

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// The orchestrator parley runs for [agent] connects to the daemon's MCP
// server as its own client (the server's secret, which no other client
// knows), whose session is never ended to make room at [mcp]
// max_sessions; another agent is not. No turn runs, so the agent's
// command is never started.
func TestOrchestratorIsOwnClient(t *testing.T) {
	st := newStack(t)
	st.noAgent = true
	st.cfg.Agent = config.Agent{Kind: config.AgentClaudeCode, Command: "claude", Workdir: t.TempDir(),
		Permissions: config.PermissionsAsk, MaxRunning: 1}
	log := st.captureLog(slog.LevelInfo)
	st.start()

	connected := func(client string) (own, ok bool) {
		sc := bufio.NewScanner(strings.NewReader(log.String()))
		for sc.Scan() {
			var line struct {
				Msg    string `json:"msg"`
				Client string `json:"client"`
				Own    bool   `json:"own"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "agent connected" && line.Client == client {
				return line.Own, true
			}
		}
		return false, false
	}
	deadline := time.After(30 * time.Second)
	for {
		own, ok := connected("parley-orchestrator")
		if ok {
			if !own {
				t.Fatal("the orchestrator connected as any agent, not as the daemon's own client")
			}
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the orchestrator did not connect:\n%s", log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}

	connectAgent(t, st.m.Addr())
	if own, ok := connected("e2e"); !ok || own {
		t.Fatalf("an agent connected as own=%v (logged: %v)", own, ok)
	}
}
