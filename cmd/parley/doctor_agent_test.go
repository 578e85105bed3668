package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// fakeClaude is a shell script standing in for Claude Code's command line
// as its documentation and 2.1.328 behave: `--version` prints "2.1.328
// (Claude Code)"; `auth status --json` prints the status as JSON and exits
// 1 when neither a login nor ANTHROPIC_API_KEY gives it access. It records
// the environment and directory it ran in under record. Other behaviours
// replace the script's body.
const fakeClaude = `#!/bin/sh
export -p > "$RECORD/env"
pwd > "$RECORD/pwd"
case "$1" in
--version) echo "2.1.328 (Claude Code)" ;;
auth)
	if [ -n "$ANTHROPIC_API_KEY" ]; then
		echo '{"loggedIn": true, "authMethod": "api_key", "apiProvider": "firstParty", "apiKeySource": "ANTHROPIC_API_KEY"}'
	else
		echo '{"loggedIn": false, "authMethod": "none", "apiProvider": "firstParty"}'
		exit 1
	fi ;;
*) echo "unexpected arguments: $*" >&2; exit 2 ;;
esac
`

// writeScript writes an executable script into dir and returns its path.
func writeScript(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	body = strings.ReplaceAll(body, "$RECORD", dir)
	if err := os.WriteFile(path, []byte(body), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

// agentEnvFor is doctor's environment for an agent command: kind
// claude-code, that command, a working directory of its own.
func agentEnvFor(t *testing.T, command string, more ...string) (workdir string, env []string) {
	t.Helper()
	workdir = t.TempDir()
	return workdir, append([]string{"PATH=" + os.Getenv("PATH"), "PARLEY_AGENT_KIND=claude-code",
		"PARLEY_AGENT_COMMAND=" + command, "PARLEY_AGENT_WORKDIR=" + workdir}, more...)
}

// TestDoctorAgentNone: without [agent] kind parley runs no agent, and
// doctor says agents connect on their own.
func TestDoctorAgentNone(t *testing.T) {
	code, fs := runDoctor(t)
	if code != exitOK {
		t.Errorf("exit %d: %+v", code, fs)
	}
	wantFinding(t, fs, "agent", true, "none run by parley", "agents connect on their own over MCP", `kind = "claude-code"`)
}

// TestDoctorAgentRuns: the command runs as the orchestrator would start
// it (in workdir, with parley's environment minus CLAUDE* plus [agent]
// env), and the finding says its version and how it logs in.
func TestDoctorAgentRuns(t *testing.T) {
	dir := t.TempDir()
	claude := writeScript(t, dir, "claude", fakeClaude, 0o755)
	workdir, env := agentEnvFor(t, claude, "CLAUDECODE=1", "CLAUDE_CODE_ENTRYPOINT=cli",
		"PARLEY_AGENT_ENV=ANTHROPIC_API_KEY=sk-ant-doctor-test,CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000", "PARLEY_AGENT_MAX_RUNNING=2")
	code, fs := runDoctor(t, env...)
	if code != exitOK {
		t.Errorf("exit %d: %+v", code, fs)
	}
	f := wantFinding(t, fs, "agent", true, claude+" runs: 2.1.328 (Claude Code)", "logged in (api_key from ANTHROPIC_API_KEY)",
		"works in "+workdir, "permissions ask", "at most 2 at once")
	if strings.Contains(f.Detail, "tested with") || strings.Contains(f.Detail, "sk-ant-doctor-test") {
		t.Errorf("detail %q", f.Detail)
	}
	recorded, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"ANTHROPIC_API_KEY='sk-ant-doctor-test'", "CLAUDE_CODE_MAX_OUTPUT_TOKENS='8000'"} {
		if !strings.Contains(string(recorded), w) {
			t.Errorf("the agent's environment lacks %s:\n%s", w, recorded)
		}
	}
	for _, n := range []string{"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT"} {
		if strings.Contains(string(recorded), n+"=") {
			t.Errorf("parley's own %s reached the agent:\n%s", n, recorded)
		}
	}
	if pwd, _ := os.ReadFile(filepath.Join(dir, "pwd")); strings.TrimSpace(string(pwd)) != workdir {
		t.Errorf("ran in %q, want %s", pwd, workdir)
	}
}

// TestDoctorAgentFindings: each way the command can fail is a finding
// with its fix; what only looks odd is a warning on a passed one.
func TestDoctorAgentFindings(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		command string
		env     []string // more of doctor's environment
		ok      bool
		want    []string
	}{
		{"not installed", "parley-test-no-such-claude", nil, false,
			[]string{`the agent command "parley-test-no-such-claude" is not installed (not found on PATH)`,
				"npm install -g @anthropic-ai/claude-code", "PARLEY_AGENT_COMMAND"}},
		{"no such path", filepath.Join(dir, "missing", "claude"), nil, false,
			[]string{"does not exist", "npm install -g @anthropic-ai/claude-code"}},
		{"not executable", writeScript(t, dir, "plain", fakeClaude, 0o644), nil, false,
			[]string{"cannot be run: permission denied", "chmod +x " + filepath.Join(dir, "plain")}},
		{"not a program", writeScript(t, dir, "garbage", "\x7fELF\x02\x01\x01garbage", 0o755), nil, false,
			[]string{"is not a program this machine runs (exec format error)", "reinstall Claude Code"}},
		{"fails", writeScript(t, dir, "broken", "#!/bin/sh\necho 'Error: Cannot find module ./cli.js' >&2\nexit 1\n", 0o755), nil, false,
			[]string{"--version` failed (exit status 1): Error: Cannot find module ./cli.js", "to see why"}},
		{"not logged in", writeScript(t, dir, "claude", fakeClaude, 0o755), nil, false,
			[]string{"runs (2.1.328 (Claude Code)) but is not logged in, and ANTHROPIC_API_KEY is not set", "claude auth login", "PARLEY_AGENT_ENV"}},
		{"not Claude Code", writeScript(t, dir, "node", "#!/bin/sh\necho v20.20.2\n", 0o755), nil, true,
			[]string{`says "v20.20.2", not Claude Code`, "authentication not checked"}},
		{"another version, no auth command", writeScript(t, dir, "old", "#!/bin/sh\n[ \"$1\" = --version ] && echo '1.0.3 (Claude Code)' && exit 0\necho \"error: unknown command '$1'\" >&2\nexit 1\n", 0o755), nil, true,
			[]string{"runs: 1.0.3 (Claude Code)", "parley is tested with Claude Code 2.1.328", "authentication not checked (", "auth status gave no status"}},
		{"works in the root", writeScript(t, dir, "claude", fakeClaude, 0o755), []string{"PARLEY_AGENT_WORKDIR=/", "ANTHROPIC_API_KEY=sk-ant-doctor-test"}, true,
			[]string{"logged in (api_key from ANTHROPIC_API_KEY)", "warning: it works in /; set [agent] workdir (PARLEY_AGENT_WORKDIR)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, env := agentEnvFor(t, tt.command, tt.env...)
			code, fs := runDoctor(t, env...)
			if tt.ok != (code == exitOK) {
				t.Errorf("exit %d", code)
			}
			wantFinding(t, fs, "agent", tt.ok, tt.want...)
		})
	}
}

// TestDoctorAgentHangs: a command that does not answer is stopped at the
// deadline and reported, not waited for.
func TestDoctorAgentHangs(t *testing.T) {
	dir := t.TempDir()
	// The command would answer after an hour: a check that returns at all
	// within the test's minute stopped it, however slow the machine.
	hang := writeScript(t, dir, "claude", "#!/bin/sh\nexec sleep 3600\n", 0o755)
	cfg := config.Default()
	cfg.Agent.Kind, cfg.Agent.Command, cfg.Agent.Workdir = config.AgentClaudeCode, hang, dir
	c := &checkup{cfg: cfg, env: []string{"PATH=" + os.Getenv("PATH")}, agentTimeout: 300 * time.Millisecond}
	done := make(chan finding, 1)
	go func() { done <- c.checkAgents(context.Background())[0] }()
	var f finding
	select {
	case f = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the check still waits, a minute on, for a command past its 300ms deadline")
	}
	if f.OK || !strings.Contains(f.Problem, "`"+hang+" --version` did not answer within 300ms") || !strings.Contains(f.Fix, "yourself") {
		t.Errorf("finding %+v", f)
	}
}

// TestDoctorAgentRealCLI runs the check against the real Claude Code,
// offline, in a HOME of its own: with an API key it passes and says the
// version; without one (and no login in that HOME) it says how to log in.
func TestDoctorAgentRealCLI(t *testing.T) {
	t.Parallel()
	claude := claudetest.CLI(t)
	quiet := []string{"DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "ANTHROPIC_BASE_URL=http://127.0.0.1:9"}

	_, env := agentEnvFor(t, claude, append(quiet, "ANTHROPIC_API_KEY=sk-ant-doctor-test")...)
	code, fs := runDoctor(t, env...)
	if code != exitOK {
		t.Errorf("exit %d: %+v", code, fs)
	}
	wantFinding(t, fs, "agent", true, claude+" runs: "+claudeCodeTested+" (Claude Code)", "logged in (api_key from ANTHROPIC_API_KEY)")

	_, env = agentEnvFor(t, claude, quiet...)
	if code, fs = runDoctor(t, env...); code != exitFailed {
		t.Errorf("exit %d: %+v", code, fs)
	}
	wantFinding(t, fs, "agent", false, "is not logged in, and ANTHROPIC_API_KEY is not set", "claude auth login")
}

// TestDoctorNamedAgents: every agent parley runs is checked, each its own
// finding naming the keys of its own section; one whose command is missing
// is a problem, as it fails its sessions.
func TestDoctorNamedAgents(t *testing.T) {
	dir := t.TempDir()
	claude := writeScript(t, dir, "claude", fakeClaude, 0o755)
	_, env := agentEnvFor(t, claude, "ANTHROPIC_API_KEY=sk-ant-doctor-test",
		"PARLEY_AGENTS_OC_KIND=opencode",
		"PARLEY_AGENTS_CC2_KIND=claude-code", "PARLEY_AGENTS_CC2_COMMAND="+filepath.Join(dir, "missing", "claude"))
	code, fs := runDoctor(t, env...)
	if code == exitOK {
		t.Errorf("exit %d with agents that cannot run", code)
	}
	wantFinding(t, fs, "agent", true, claude+" runs: 2.1.328 (Claude Code)", "at most 4 at once")
	wantFinding(t, fs, "agent oc", false, `the agent command "opencode" is not installed`,
		"npm install -g opencode-ai, or set [agents.oc] command (PARLEY_AGENTS_OC_COMMAND)")
	f := wantFinding(t, fs, "agent cc2", false, "does not exist", "[agents.cc2] command (PARLEY_AGENTS_CC2_COMMAND)")
	if strings.Contains(f.Detail+f.Fix, "PARLEY_AGENT_COMMAND") {
		t.Errorf("a named agent's finding names [agent]'s key: %+v", f)
	}
}
