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
		{"kind", []string{"PARLEY_AGENT_KIND=cursor"},
			[]string{`config: agent.kind: "cursor" is not an agent parley runs: write "claude-code", "acp", "opencode", "gemini" or "codex", or "" to let agents connect on their own (set [agent] kind or PARLEY_AGENT_KIND)`}},
		{"acp without command", []string{"PARLEY_AGENT_KIND=acp"},
			[]string{`config: agent.command: required with kind "acp": the agent's ACP command, like opencode (with args = ["acp"]) (set [agent] command or PARLEY_AGENT_COMMAND)`}},
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

// A command of white space, from the file: the environment cannot set
// one. An empty one is the kind's.
func TestAgentBlankCommand(t *testing.T) {
	path, msg := loadErr(t, "[agent]\ncommand = \"  \"\n", home)
	if !strings.Contains(msg, `config: agent.command: only white space; the agent's program or its path, or leave it out for its kind's (set [agent] command or PARLEY_AGENT_COMMAND)`) {
		t.Errorf("%s: %s", path, msg)
	}
	if c := load(t, "[agent]\ncommand = \"\"\n", home); c.Agent.Command != "" {
		t.Errorf("with kind empty, command %q", c.Agent.Command)
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

// The presets: an ACP kind runs its agent's command line unless command
// or args say otherwise; claude-code runs claude.
func TestAgentPresets(t *testing.T) {
	work := t.TempDir()
	for _, tc := range []struct {
		file    string
		command string
		args    []string
	}{
		{`kind = "claude-code"`, "claude", nil},
		{`kind = "opencode"`, "opencode", []string{"acp"}},
		{`kind = "gemini"`, "gemini", []string{"--experimental-acp"}},
		{`kind = "codex"`, "codex-acp", nil},
		{"kind = \"opencode\"\ncommand = \"/opt/oc/bin/opencode\"", "/opt/oc/bin/opencode", []string{"acp"}},
		{"kind = \"opencode\"\nargs = [\"acp\", \"--print-logs\"]", "opencode", []string{"acp", "--print-logs"}},
		{"kind = \"opencode\"\ncommand = \"oc-wrapper\"\nargs = []", "oc-wrapper", []string{}},
		{"kind = \"acp\"\ncommand = \"goose\"\nargs = [\"acp\"]", "goose", []string{"acp"}},
	} {
		c := load(t, "[agent]\nworkdir = \""+work+"\"\n"+tc.file+"\n", home)
		if c.Agent.Command != tc.command || !reflect.DeepEqual(c.Agent.Args, tc.args) {
			t.Errorf("%s: command %q args %q, want %q %q", tc.file, c.Agent.Command, c.Agent.Args, tc.command, tc.args)
		}
	}
}

// Named agents, from the file and from the environment: their keys and
// defaults (workdir and permissions [agent]'s, command and args their
// kind's), listed after the default one by name, printed and redacted
// like every section.
func TestNamedAgents(t *testing.T) {
	work, other := t.TempDir(), t.TempDir()
	file := `[agent]
kind = "claude-code"
workdir = "` + work + `"
permissions = "allow"

[agents.codex]
kind = "codex"
env = ["OPENAI_API_KEY=sk-codex-secret"]

[agents.oc]
kind = "opencode"
workdir = "` + other + `"
permissions = "ask"
`
	c := load(t, file, withHome("PARLEY_AGENTS_GEM_KIND=gemini", "PARLEY_AGENTS_GEM_ARGS=--experimental-acp,--yolo",
		"PARLEY_AGENTS_CODEX_COMMAND=/opt/codex-acp"))
	got := c.RunAgents()
	var names []string
	for _, a := range got {
		names = append(names, a.Name)
	}
	if !reflect.DeepEqual(names, []string{"default", "codex", "gem", "oc"}) {
		t.Fatalf("agents %q", names)
	}
	codex, gem, oc := got[1].Agent, got[2].Agent, got[3].Agent
	if codex.Kind != "codex" || codex.Command != "/opt/codex-acp" || codex.Workdir != work || codex.Permissions != "allow" ||
		!reflect.DeepEqual(codex.Env, []string{"OPENAI_API_KEY=sk-codex-secret"}) || !codex.ACP() {
		t.Errorf("codex %+v", codex)
	}
	if gem.Command != "gemini" || !reflect.DeepEqual(gem.Args, []string{"--experimental-acp", "--yolo"}) || gem.Workdir != work {
		t.Errorf("gem %+v", gem)
	}
	if oc.Command != "opencode" || oc.Workdir != other || oc.Permissions != "ask" {
		t.Errorf("oc %+v", oc)
	}
	s := c.String()
	if strings.Contains(s, "sk-codex-secret") || !strings.Contains(s, "[agents.codex]") || !strings.Contains(s, `env = ["OPENAI_API_KEY=***"]`) {
		t.Errorf("String():\n%s", s)
	}
	if c.Agents["codex"].Env[0] != "OPENAI_API_KEY=sk-codex-secret" {
		t.Error("Redacted changed the configuration's own agent")
	}
	if unknown := UnknownEnv(withHome("PARLEY_AGENTS_GEM_KIND=gemini", "PARLEY_AGENTS_GEM_KINF=x"), known); !reflect.DeepEqual(unknown, []string{"PARLEY_AGENTS_GEM_KINF"}) {
		t.Errorf("UnknownEnv = %q", unknown)
	}
	if load(t, "", home).RunAgents() != nil {
		t.Error("agents run without [agent] kind")
	}
}

// Every rule of named agents, each naming the key and where to set it.
func TestNamedAgentValidation(t *testing.T) {
	work := t.TempDir()
	base := "[agent]\nkind = \"claude-code\"\nworkdir = \"" + work + "\"\n"
	for _, tc := range []struct {
		name, file string
		env        []string
		want       string
	}{
		{"no kind", base + "[agents.codex]\ncommand = \"codex-acp\"\n", nil,
			`config: agents.codex.kind: empty; write the agent's kind: "claude-code", "acp", "opencode", "gemini" or "codex" (set [agents.codex] kind or PARLEY_AGENTS_CODEX_KIND)`},
		{"bad kind", base + "[agents.x]\nkind = \"cursor\"\n", nil,
			`config: agents.x.kind: "cursor" is not an agent parley runs: write "claude-code", "acp", "opencode", "gemini" or "codex" (set [agents.x] kind`},
		{"max_running", base + "[agents.codex]\nkind = \"codex\"\nmax_running = 2\n", nil,
			"config: agents.codex.max_running: set in [agent] only: it bounds every agent's conversations together; remove it here"},
		{"named default", base + "[agents.default]\nkind = \"codex\"\n", nil,
			`config: agents.default: "default" is [agent]'s name; name the agent otherwise`},
		{"bad name", base + "[agents.Codex]\nkind = \"codex\"\n", nil,
			`config: agents.Codex: "Codex" is not an agent's name: lower-case letters`},
		{"no default agent", "[agents.codex]\nkind = \"codex\"\nworkdir = \"" + work + "\"\n", nil,
			"config: agent.kind: empty, but named agents are set ([agents.codex]): they run beside a default agent; set [agent] kind"},
		{"from the environment", base, []string{"PARLEY_AGENTS_OC_KIND=opencode", "PARLEY_AGENTS_OC_PERMISSIONS=maybe"},
			`config: agents.oc.permissions: "maybe" is not one of ask`},
		{"misspelt key", base + "[agents.codex]\nkind = \"codex\"\ncomand = \"x\"\n", nil,
			"unknown key agents.codex.comand (did you mean agents.codex.command?)"},
		{"missing workdir", base + "[agents.codex]\nkind = \"codex\"\nworkdir = \"" + work + "/gone\"\n", nil,
			`config: agents.codex.workdir: "` + work + `/gone": no such file or directory`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, msg := loadErr(t, tc.file, withHome(tc.env...))
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error does not contain %q:\n%s", tc.want, msg)
			}
		})
	}
}

// TestAgentKey: where an agent's key is set, as people are told: a named
// agent's section and variable, none for a name a variable cannot hold.
func TestAgentKey(t *testing.T) {
	for _, tc := range []struct{ name, key, want string }{
		{DefaultAgentName, "command", "[agent] command (PARLEY_AGENT_COMMAND)"},
		{"codex", "command", "[agents.codex] command (PARLEY_AGENTS_CODEX_COMMAND)"},
		{"oc_2", "workdir", "[agents.oc_2] workdir (PARLEY_AGENTS_OC_2_WORKDIR)"},
		{"my-agent", "command", "[agents.my-agent] command"},
	} {
		if got := AgentKey(tc.name, tc.key); got != tc.want {
			t.Errorf("AgentKey(%q, %q) = %q, want %q", tc.name, tc.key, got, tc.want)
		}
	}
}
