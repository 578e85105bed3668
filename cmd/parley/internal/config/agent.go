package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
)

// Agent configures an agent parley runs itself, one conversation per
// session: [agent], the default one, and each named agent
// ([agents.NAME], Config.Agents), with the same keys. With [agent] kind
// empty parley runs none and agents connect on their own over MCP, as
// before the section existed; its other keys then only need to be well
// formed, since nothing uses them. With a kind set, workdir must be an
// existing directory: the agent would otherwise fail at every session's
// first message, far from the configuration that caused it.
//
// Named agents: a section [agents.NAME] for each, NAME of lower-case
// letters, digits, "_" and "-" ("default" is the [agent] one's). Its kind
// is required; its workdir and permissions default to [agent]'s, its
// command and args to its kind's, and max_running is [agent]'s alone (it
// bounds every agent's conversations together). They run beside a default
// one: named agents with [agent] kind empty are refused. From the
// environment a named agent's key is PARLEY_AGENTS_<NAME>_<KEY>
// (PARLEY_AGENTS_CODEX_KIND=codex), NAME in upper case, which makes the
// agent when it is not in the file; a name with "-" is written in the file
// only, since a variable's name cannot hold one.
type Agent struct {
	// Kind is the agent parley runs for each session: "claude-code" runs
	// Claude Code headless; "acp" any agent speaking the Agent Client
	// Protocol on stdio (command and args are its command line);
	// "opencode", "gemini" and "codex" are ACP with that agent's command
	// line (opencode acp, gemini --experimental-acp, codex-acp), which
	// command and args override. One conversation per session, resumed
	// across turns and restarts. Default "": parley runs none, agents
	// connect on their own over MCP.
	Kind string `toml:"kind"`
	// Command is the agent's program, found on PATH unless it is a path.
	// Default: its kind's, claude for claude-code, opencode, gemini,
	// codex-acp; required for kind acp.
	Command string `toml:"command"`
	// Args are the agent's arguments: for claude-code extra ones, passed
	// after parley's own; for the ACP kinds the whole of them (default:
	// the kind's, acp for opencode, --experimental-acp for gemini; args =
	// [] for none). In the environment comma-separated, so an argument
	// there cannot hold a comma. Default none.
	Args []string `toml:"args"`
	// Workdir is the directory the agent works in, as an absolute path (a
	// leading "~/" is expanded to $HOME). It must exist when kind is set.
	// Default: the directory parley was started in.
	Workdir string `toml:"workdir"`
	// Permissions says who answers the agent's permission prompts: "ask"
	// (the default) asks the session's people, with Approve / Deny and
	// continue / Deny and abort (and Always allow where the agent offers
	// it); "allow" leaves it to the agent's own settings (Claude Code's
	// allow and deny rules, its permission mode; an ACP agent's prompts
	// are allowed once each).
	Permissions string `toml:"permissions"`
	// MaxRunning bounds the conversations running at once, of every
	// agent together; a session with work past it waits, and its people
	// are told so. Default 4.
	MaxRunning int64 `toml:"max_running"`
	// Env are NAME=value settings added to the agent's environment, which
	// is otherwise parley's own without its CLAUDE* variables (so
	// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and HOME apply). Values are
	// never logged. In the environment comma-separated, so a value there
	// cannot hold a comma. Default none.
	Env []string `toml:"env" secret:"true"`

	// named marks a named agent ([agents.NAME]) for its checks.
	named bool
}

// Agent kinds and permission modes.
const (
	AgentClaudeCode  = "claude-code"
	AgentACP         = "acp"
	AgentOpenCode    = "opencode"
	AgentGemini      = "gemini"
	AgentCodex       = "codex"
	PermissionsAsk   = "ask"
	PermissionsAllow = "allow"
)

// DefaultAgentName is the name people use for [agent], the default agent.
const DefaultAgentName = "default"

// AgentKey is where key k of the agent name is set, as people are told to
// set it: "[agent] command (PARLEY_AGENT_COMMAND)", "[agents.codex]
// command (PARLEY_AGENTS_CODEX_COMMAND)"; a name with "-" is set in the
// file only ("[agents.my-agent] command"), since a variable's name cannot
// hold one.
func AgentKey(name, k string) string {
	if name == DefaultAgentName {
		return "[agent] " + k + " (" + envName([]string{"agent", k}) + ")"
	}
	if strings.Contains(name, "-") {
		return "[agents." + name + "] " + k
	}
	return "[agents." + name + "] " + k + " (" + envName([]string{"agents", name, k}) + ")"
}

// agentPresets are the kinds' command lines: the command, then the args.
var agentPresets = map[string][]string{
	AgentClaudeCode: {"claude"},
	AgentOpenCode:   {"opencode", "acp"},
	AgentGemini:     {"gemini", "--experimental-acp"},
	AgentCodex:      {"codex-acp"},
}

// agentKinds lists the kinds, for errors.
const agentKinds = `"claude-code", "acp", "opencode", "gemini" or "codex"`

// DefaultMaxRunning is [agent] max_running's default.
const DefaultMaxRunning = 4

// Enabled reports whether parley runs an agent itself.
func (a Agent) Enabled() bool { return a.Kind != "" }

// ACP reports whether the agent speaks the Agent Client Protocol.
func (a Agent) ACP() bool {
	switch a.Kind {
	case AgentACP, AgentOpenCode, AgentGemini, AgentCodex:
		return true
	}
	return false
}

// defaultAgent is the section's defaults: the directory parley was
// started in; command and args the kind's (resolveAgents).
func defaultAgent() Agent {
	wd, _ := os.Getwd() // "" when unknown: Validate then asks for one
	return Agent{Workdir: wd, Permissions: PermissionsAsk, MaxRunning: DefaultMaxRunning}
}

// NamedAgent is an agent parley runs, with its name.
type NamedAgent struct {
	// Name is DefaultAgentName for [agent], NAME for [agents.NAME].
	Name  string
	Agent Agent
}

// RunAgents lists the agents parley runs: [agent] as DefaultAgentName
// first, then the named ones by name; none when [agent] kind is empty. The
// defaults that depend on other keys are filled in, as Load does, for a
// Config built in code.
func (c Config) RunAgents() []NamedAgent {
	if !c.Agent.Enabled() {
		return nil
	}
	c.Agents = cloneAgents(c.Agents)
	c.resolveAgents()
	out := []NamedAgent{{Name: DefaultAgentName, Agent: c.Agent}}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		out = append(out, NamedAgent{Name: name, Agent: *c.Agents[name]})
	}
	return out
}

// agentName is what a named agent's name may be: lower case, so that a
// variable's upper-case NAME means it, and what people type after
// /agent.
var agentName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)

// envKey is a variable name a shell can set.
var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// agentKeys are the keys of an agent's section, longest first, for
// reading PARLEY_AGENTS_<NAME>_<KEY>.
var agentKeys = func() []string {
	var keys []string
	t := reflect.TypeFor[Agent]()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); name != "" && t.Field(i).IsExported() {
			keys = append(keys, name)
		}
	}
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	return keys
}()

// agentsEnvPrefix starts the variables of named agents.
const agentsEnvPrefix = envPrefix + "AGENTS_"

// agentEnvName splits a variable of a named agent into the agent's name
// and the key; ok is false for any other variable.
func agentEnvName(v string) (name, key string, ok bool) {
	rest, ok := strings.CutPrefix(v, agentsEnvPrefix)
	if !ok {
		return "", "", false
	}
	for _, k := range agentKeys {
		if n, found := strings.CutSuffix(rest, "_"+strings.ToUpper(k)); found && n != "" {
			return strings.ToLower(n), k, true
		}
	}
	return "", "", false
}

// agentsFromEnv adds to c each named agent a variable of env sets a key of
// (set to something non-empty) and the file does not have, so that
// applyEnv sets its keys.
func agentsFromEnv(c *Config, env []string) {
	for v, value := range envMap(env) {
		name, _, ok := agentEnvName(v)
		if !ok || value == "" {
			continue
		}
		if c.Agents == nil {
			c.Agents = map[string]*Agent{}
		}
		if c.Agents[name] == nil {
			c.Agents[name] = &Agent{}
		}
	}
}

// resolveAgents fills in the defaults that depend on other keys: an
// agent's command and args from its kind, a named agent's workdir and
// permissions from [agent].
func (c *Config) resolveAgents() {
	resolve := func(a *Agent) {
		preset, ok := agentPresets[a.Kind]
		if !ok {
			return
		}
		if a.Command == "" {
			a.Command = preset[0]
		}
		if a.Args == nil && len(preset) > 1 {
			a.Args = slices.Clone(preset[1:])
		}
	}
	resolve(&c.Agent)
	for _, a := range c.Agents {
		a.named = true
		if a.Workdir == "" {
			a.Workdir = c.Agent.Workdir
		}
		if a.Permissions == "" {
			a.Permissions = c.Agent.Permissions
		}
		resolve(a)
	}
}

// validateAgents checks what concerns the agents together: their names,
// and that named ones have a default one beside them.
func (c *Config) validateAgents(bad func(key, format string, args ...any)) {
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		switch {
		case name == DefaultAgentName:
			bad("agents."+name, "%q is [agent]'s name; name the agent otherwise, like [agents.codex]", name)
		case !agentName.MatchString(name):
			bad("agents."+name, "%q is not an agent's name: lower-case letters, digits, _ and -, at most 32, starting with a letter or digit", name)
		}
	}
	if len(c.Agents) > 0 && !c.Agent.Enabled() {
		bad("agent.kind", "empty, but named agents are set ([agents.%s]): they run beside a default agent; set [agent] kind to the agent of sessions that name none",
			slices.Sorted(maps.Keys(c.Agents))[0])
	}
}

// Validate implements Section. A problem never quotes an env value, which
// may be a key.
func (a Agent) Validate(report func(key, problem string)) {
	switch a.Kind {
	case AgentClaudeCode, AgentACP, AgentOpenCode, AgentGemini, AgentCodex:
	case "":
		if a.named {
			report("kind", "empty; write the agent's kind: "+agentKinds)
		}
	default:
		nothing := `, or "" to let agents connect on their own`
		if a.named {
			nothing = ""
		}
		report("kind", fmt.Sprintf(`%q is not an agent parley runs: write %s%s`, a.Kind, agentKinds, nothing))
	}
	switch {
	case a.Kind == AgentACP && strings.TrimSpace(a.Command) == "":
		report("command", `required with kind "acp": the agent's ACP command, like opencode (with args = ["acp"])`)
	case a.Command != "" && strings.TrimSpace(a.Command) == "":
		report("command", "only white space; the agent's program or its path, or leave it out for its kind's")
	}
	switch a.Permissions {
	case PermissionsAsk, PermissionsAllow:
	default:
		report("permissions", fmt.Sprintf(`%q is not one of ask (the session's people answer each prompt), allow (the agent's own settings decide)`, a.Permissions))
	}
	switch {
	case a.named && a.MaxRunning != 0:
		report("max_running", "set in [agent] only: it bounds every agent's conversations together; remove it here")
	case !a.named && a.MaxRunning < 1:
		report("max_running", fmt.Sprintf("%d; at least 1 (default %d)", a.MaxRunning, DefaultMaxRunning))
	}
	for i, kv := range a.Env {
		name, _, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			report("env", fmt.Sprintf("item %d has no \"=\"; write NAME=value, like CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000", i+1))
		case !envKey.MatchString(name):
			report("env", fmt.Sprintf("item %d: %q is not a variable name (letters, digits and _, not starting with a digit); write NAME=value", i+1, name))
		}
	}
	a.validateWorkdir(report)
}

// validateWorkdir checks the working directory: absolute always, and an
// existing directory when an agent runs in it.
func (a Agent) validateWorkdir(report func(key, problem string)) {
	switch {
	case a.Workdir == "" && a.Enabled():
		report("workdir", "empty, and the directory parley was started in is unknown; write the directory the agent works in, like /home/me/work")
	case a.Workdir == "":
	case !filepath.IsAbs(a.Workdir):
		report("workdir", fmt.Sprintf("%q is not an absolute path; write it from the root, like /home/me/work", a.Workdir))
	case a.Enabled():
		info, err := os.Stat(a.Workdir)
		switch {
		case err != nil:
			report("workdir", fmt.Sprintf("%q: %v; create it, or name the directory the agent works in", a.Workdir, unwrapPath(err)))
		case !info.IsDir():
			report("workdir", fmt.Sprintf("%q is not a directory; name the directory the agent works in", a.Workdir))
		}
	}
}

// agentsType is the type of Config.Agents, whose sections the walks take
// as [agents.NAME].
var agentsType = reflect.TypeFor[map[string]*Agent]()

// agentsTable is the TOML table of the named agents.
const agentsTable = "agents"

// agentsExample is what the example says of named agents, which have no
// defaults to show: indented, so that uncommenting the example's keys
// leaves it a comment.
const agentsExample = `
# Named agents, beside [agent], chosen per session: /new --agent NAME,
# the page's new-session form, session.create's agent; /agent NAME
# switches a session, /agent lists them. A section [agents.NAME] each,
# with the keys of [agent] (kind required; workdir and permissions default
# to [agent]'s; max_running is [agent]'s alone), or the variables
# PARLEY_AGENTS_<NAME>_<KEY>. For example:
#
#   [agents.codex]
#   kind = "codex"
#
#   [agents.opencode]
#   kind = "opencode"
#   workdir = "/home/me/other-project"
`

// cloneAgents copies the named agents, so that a copy of a Config shares
// none of them.
func cloneAgents(m map[string]*Agent) map[string]*Agent {
	if m == nil {
		return nil
	}
	out := make(map[string]*Agent, len(m))
	for name, a := range m {
		cp := *a
		cp.Args, cp.Env = slices.Clone(a.Args), slices.Clone(a.Env)
		out[name] = &cp
	}
	return out
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
