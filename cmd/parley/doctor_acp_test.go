//go:build linux

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// fakeACP is an ACP agent in sh: it writes its pid to $RECORD/pid and
// every line it reads to $RECORD/lines, and answers initialize with
// RESULT (a JSON-RPC result or error member).
const fakeACP = `#!/bin/sh
echo $$ > "$RECORD/pid"
IFS= read -r line
printf '%s\n' "$line" >> "$RECORD/lines"
id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,RESULT}\n' "$id"
while IFS= read -r line; do printf '%s\n' "$line" >> "$RECORD/lines"; done
`

// fakeACPAgent writes fakeACP answering with result as dir/opencode.
func fakeACPAgent(t *testing.T, dir, result string) string {
	return writeScript(t, dir, "opencode", strings.Replace(fakeACP, "RESULT", result, 1), 0o755)
}

// acpCheckup is a checkup whose agents find commands in dir first.
func acpCheckup(dir string) *checkup {
	return &checkup{cfg: config.Default(), env: []string{"PATH=" + dir + ":" + os.Getenv("PATH")}, agentTimeout: 20 * time.Second}
}

// probeGone fails the test when the agent the check started is still
// there: the check stops it.
func probeGone(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		t.Fatalf("the agent was not started: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the agent process %d is still there after the check: %v", pid, err)
	}
}

// TestDoctorACP: the check starts the agent, asks initialize alone (no
// session, so no model call), reports its answer, and stops it.
func TestDoctorACP(t *testing.T) {
	dir := t.TempDir()
	fakeACPAgent(t, dir, `"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true,"sse":false}},"authMethods":[],"agentInfo":{"name":"FakeAgent","version":"9.9"}}`)
	c := acpCheckup(dir)
	f := c.checkACP(context.Background(), agentKeys("oc"),
		config.Agent{Kind: config.AgentOpenCode, Command: "opencode", Args: []string{"acp"}, Workdir: dir, Permissions: "ask"})
	for _, want := range []string{"`opencode acp` answers ACP: FakeAgent 9.9, protocol version 1",
		"continues conversations after parley restarts (loadSession)", "over HTTP (mcpCapabilities.http)",
		"works in " + dir + ", permissions ask"} {
		if !f.OK || !strings.Contains(f.Detail, want) {
			t.Errorf("finding %+v, want it to say %q", f, want)
		}
	}
	lines, err := os.ReadFile(filepath.Join(dir, "lines"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(lines), "\n"); n != 1 || !strings.Contains(string(lines), `"method":"initialize"`) {
		t.Errorf("the agent read %q, want initialize alone", lines)
	}
	probeGone(t, dir)

	// An agent that offers neither: a warning, and how parley's tools
	// reach it instead.
	bare := t.TempDir()
	fakeACPAgent(t, bare, `"result":{"protocolVersion":1,"agentCapabilities":{}}`)
	f = acpCheckup(bare).checkACP(context.Background(), agentKeys(config.DefaultAgentName),
		config.Agent{Kind: config.AgentACP, Command: "opencode", Workdir: bare, Permissions: "allow"})
	for _, want := range []string{"`opencode` answers ACP: an agent that gives no name, protocol version 1",
		"warning: it cannot continue a conversation after parley restarts (no loadSession)",
		"through `parley mcp` on stdio"} {
		if !f.OK || !strings.Contains(f.Detail, want) {
			t.Errorf("finding %+v, want it to say %q", f, want)
		}
	}
}

// TestDoctorACPProblems: an agent that exits at once, does not answer
// initialize in time or answers it with an error is a problem, with the
// fix naming the agent's own keys; a missing command says how to install
// it. Each started agent is stopped.
func TestDoctorACPProblems(t *testing.T) {
	cases := []struct {
		name, script   string
		timeout        time.Duration
		problem, fix   string
		started, named bool
	}{
		// It reads initialize before it exits: one that exits before
		// parley writes it is told apart by the failed write (EPIPE).
		{name: "exits", script: "#!/bin/sh\necho $$ > \"$RECORD/pid\"\nread line\necho 'opencode: unknown command' >&2\nexit 3\n",
			problem: "exited as it started: exit status 3",
			fix:     "yourself to see why it exits; [agents.oc] command (PARLEY_AGENTS_OC_COMMAND) and [agents.oc] args (PARLEY_AGENTS_OC_ARGS) must start the agent speaking ACP on its standard input and output (OpenCode's: opencode acp)",
			started: true, named: true},
		{name: "silent", script: "#!/bin/sh\necho $$ > \"$RECORD/pid\"\nexec sleep 60\n", timeout: 300 * time.Millisecond,
			problem: "did not answer ACP's initialize within 300ms", fix: "yourself to see what it waits for; [agent] command (PARLEY_AGENT_COMMAND)",
			started: true},
		{name: "error", script: strings.Replace(fakeACP, "RESULT", `"error":{"code":-32603,"message":"no provider configured"}`, 1),
			problem: "refused ACP's initialize", fix: "see why it refuses; check the agent's own configuration",
			started: true},
		{name: "version", script: strings.Replace(fakeACP, "RESULT", `"result":{"protocolVersion":2,"agentCapabilities":{}}`, 1),
			problem: "speaks ACP version 2", fix: "ACP version 1", started: true},
		{name: "not executable", script: "", problem: "cannot be run", fix: "chmod +x"},
		{name: "not a program", script: "not a program\n", problem: "exec format error", fix: "reinstall OpenCode: npm install -g opencode-ai"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mode := os.FileMode(0o755)
			if tc.script == "" {
				mode = 0o644
			}
			command := writeScript(t, dir, "opencode", tc.script, mode)
			c := acpCheckup(dir)
			if tc.timeout != 0 {
				c.agentTimeout = tc.timeout
			}
			keys := agentKeys(config.DefaultAgentName)
			if tc.named {
				keys = "oc"
			}
			f := c.checkACP(context.Background(), keys,
				config.Agent{Kind: config.AgentOpenCode, Command: command, Args: []string{"acp"}, Workdir: dir, Permissions: "ask"})
			if f.OK || !strings.Contains(f.Problem, tc.problem) || !strings.Contains(f.Fix, tc.fix) {
				t.Errorf("finding %+v, want problem %q, fix %q", f, tc.problem, tc.fix)
			}
			if tc.started {
				probeGone(t, dir)
			}
		})
	}

	c := &checkup{cfg: config.Default(), env: []string{"PATH=" + t.TempDir()}}
	f := c.checkACP(context.Background(), agentKeys("gem"), config.Agent{Kind: config.AgentGemini, Command: "gemini", Workdir: t.TempDir()})
	if f.OK || !strings.Contains(f.Problem, `the agent command "gemini" is not installed`) ||
		!strings.Contains(f.Fix, "npm install -g @google/gemini-cli, or set [agents.gem] command (PARLEY_AGENTS_GEM_COMMAND)") {
		t.Errorf("finding %+v", f)
	}
}

// TestDoctorACPOpenCode: the check against the real OpenCode, set up
// offline: it answers with its name and version and offers session/load
// and MCP over HTTP; the model is not asked anything.
func TestDoctorACPOpenCode(t *testing.T) {
	api := modeltest.NewMessages(t)
	oc := agenttest.OpenCode(t, api, agenttest.OpenCodeConfig{})
	c := &checkup{cfg: config.Default(), env: oc.Env}
	f := c.checkACP(context.Background(), agentKeys(config.DefaultAgentName), config.Agent{Kind: config.AgentOpenCode,
		Command: oc.Command[0], Args: oc.Command[1:], Workdir: oc.WorkDir, Permissions: "ask"})
	for _, want := range []string{"answers ACP: OpenCode " + agenttest.OpenCodeVersion + ", protocol version 1",
		"(loadSession)", "(mcpCapabilities.http)"} {
		if !f.OK || !strings.Contains(f.Detail, want) {
			t.Errorf("finding %+v, want it to say %q", f, want)
		}
	}
	if reqs := api.Requests(); len(reqs) != 0 {
		t.Errorf("the check reached the model: %d requests", len(reqs))
	}
}
