package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// [agent] from the environment: every key, lists comma-separated, "~/"
// expanded in workdir like data_dir.
func TestAgentFromEnv(t *testing.T) {
	home := t.TempDir()
	work := filepath.Join(home, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	c := load(t, "", []string{"HOME=" + home,
		"PARLEY_AGENT_KIND=claude-code",
		"PARLEY_AGENT_COMMAND=/usr/local/bin/claude",
		"PARLEY_AGENT_ARGS=--model, opus",
		"PARLEY_AGENT_WORKDIR=~/work",
		"PARLEY_AGENT_PERMISSIONS=allow",
		"PARLEY_AGENT_MAX_RUNNING=8",
		"PARLEY_AGENT_ENV=ANTHROPIC_BASE_URL=http://127.0.0.1:4000,DISABLE_TELEMETRY=1",
	})
	want := Agent{Kind: "claude-code", Command: "/usr/local/bin/claude", Args: []string{"--model", "opus"}, Workdir: work,
		Permissions: "allow", MaxRunning: 8, Env: []string{"ANTHROPIC_BASE_URL=http://127.0.0.1:4000", "DISABLE_TELEMETRY=1"}}
	if !reflect.DeepEqual(c.Agent, want) {
		t.Errorf("[agent] = %+v\nwant %+v", c.Agent, want)
	}
	if !c.Agent.Enabled() {
		t.Error("kind claude-code is not enabled")
	}
	if load(t, "", withHome()).Agent.Enabled() {
		t.Error("enabled by default")
	}
}

// Every rule of [agent], each error naming the key and where to set it.
func TestAgentValidation(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"kind", []string{"PARLEY_AGENT_KIND=codex"},
			[]string{`config: agent.kind: "codex" is not an agent parley runs: write "claude-code", or "" to let agents connect on their own (set [agent] kind or PARLEY_AGENT_KIND)`}},
		{"permissions", []string{"PARLEY_AGENT_PERMISSIONS=yes"},
			[]string{`config: agent.permissions: "yes" is not one of ask`, "allow", "(set [agent] permissions or PARLEY_AGENT_PERMISSIONS)"}},
		{"max_running", []string{"PARLEY_AGENT_MAX_RUNNING=0"},
			[]string{"config: agent.max_running: 0; at least 1 (default 4) (set [agent] max_running or PARLEY_AGENT_MAX_RUNNING)"}},
		{"max_running not a number", []string{"PARLEY_AGENT_MAX_RUNNING=four"},
			[]string{`config: PARLEY_AGENT_MAX_RUNNING: "four" is not an integer`}},
		{"env without =", []string{"PARLEY_AGENT_ENV=A=1,ANTHROPIC_API_KEY"},
			[]string{`config: agent.env: item 2 has no "="; write NAME=value`, "(set [agent] env or PARLEY_AGENT_ENV)"}},
		{"env bad name", []string{"PARLEY_AGENT_ENV=1X=secret-value"},
			[]string{`agent.env: item 1: "1X" is not a variable name`}},
		{"relative workdir", []string{"PARLEY_AGENT_WORKDIR=work"},
			[]string{`config: agent.workdir: "work" is not an absolute path; write it from the root`, "PARLEY_AGENT_WORKDIR"}},
		{"missing workdir", []string{"PARLEY_AGENT_KIND=claude-code", "PARLEY_AGENT_WORKDIR=" + missing},
			[]string{`config: agent.workdir: "` + missing + `": no such file or directory; create it, or name the directory the agent works in (set [agent] workdir or PARLEY_AGENT_WORKDIR)`}},
		{"workdir a file", []string{"PARLEY_AGENT_KIND=claude-code", "PARLEY_AGENT_WORKDIR=" + file},
			[]string{`agent.workdir: "` + file + `" is not a directory`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, msg := loadErr(t, "", withHome(tt.env...))
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "secret-value") {
				t.Errorf("error quotes an env value:\n%s", msg)
			}
		})
	}
}

// An empty command, from the file: the environment cannot empty a key.
func TestAgentEmptyCommand(t *testing.T) {
	path, msg := loadErr(t, "[agent]\ncommand = \"\"\n", home)
	if !strings.Contains(msg, `config: agent.command: empty; the agent's program, "claude" by default, or its path (set [agent] command or PARLEY_AGENT_COMMAND)`) {
		t.Errorf("%s: %s", path, msg)
	}
}

// Without kind nothing runs in workdir, so a directory that is not there
// yet (a configuration written on another machine) is not refused; a
// misspelt key of the section still is.
func TestAgentUnusedWorkdir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone")
	if c := load(t, "", withHome("PARLEY_AGENT_WORKDIR="+missing)); c.Agent.Workdir != missing {
		t.Errorf("workdir = %q", c.Agent.Workdir)
	}
	if _, msg := loadErr(t, "[agent]\nkind = \"claude-code\"\npermission = \"allow\"\n", home); !strings.Contains(msg, "unknown key agent.permission (did you mean agent.permissions?)") {
		t.Errorf("misspelt key: %s", msg)
	}
}
