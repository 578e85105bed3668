package config

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Agent configures the agent parley runs itself, one conversation per
// session. With Kind empty parley runs none and agents connect on their
// own over MCP, as before the section existed; its other keys then only
// need to be well formed, since nothing uses them. With Kind set,
// Workdir must be an existing directory: the agent would otherwise fail at
// every session's first message, far from the configuration that caused it.
type Agent struct {
	// Kind is the agent parley runs for each session: "claude-code" runs
	// Claude Code headless, one conversation per session, resumed across
	// turns and restarts. Default "": parley runs none, agents connect on
	// their own over MCP.
	Kind string `toml:"kind"`
	// Command is the agent's program, found on PATH unless it is a path.
	// Default claude.
	Command string `toml:"command"`
	// Args are extra arguments, passed after parley's own (in the
	// environment comma-separated, so an argument there cannot hold a
	// comma). Default none.
	Args []string `toml:"args"`
	// Workdir is the directory the agent works in, as an absolute path (a
	// leading "~/" is expanded to $HOME). It must exist when Kind is set.
	// Default: the directory parley was started in.
	Workdir string `toml:"workdir"`
	// Permissions says who answers the agent's permission prompts: "ask"
	// (the default) asks the session's people, with Approve / Deny and
	// continue / Deny and abort; "allow" leaves it to the agent's own
	// settings (Claude Code's allow and deny rules, its permission mode).
	Permissions string `toml:"permissions"`
	// MaxRunning bounds the agent processes running at once; a session
	// with work past it waits, and its people are told so. Default 4.
	MaxRunning int64 `toml:"max_running"`
	// Env are NAME=value settings added to the agent's environment, which
	// is otherwise parley's own without its CLAUDE* variables (so
	// ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL and HOME apply). Values are
	// never logged. In the environment comma-separated, so a value there
	// cannot hold a comma. Default none.
	Env []string `toml:"env" secret:"true"`
}

// Agent kinds and permission modes.
const (
	AgentClaudeCode  = "claude-code"
	PermissionsAsk   = "ask"
	PermissionsAllow = "allow"
)

// DefaultMaxRunning is [agent] max_running's default.
const DefaultMaxRunning = 4

// Enabled reports whether parley runs an agent itself.
func (a Agent) Enabled() bool { return a.Kind != "" }

// defaultAgent is the section's defaults: claude, in the directory parley
// was started in.
func defaultAgent() Agent {
	wd, _ := os.Getwd() // "" when unknown: Validate then asks for one
	return Agent{Command: "claude", Workdir: wd, Permissions: PermissionsAsk, MaxRunning: DefaultMaxRunning}
}

// envKey is a variable name a shell can set.
var envKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Validate implements Section. A problem never quotes an env value, which
// may be a key.
func (a Agent) Validate(report func(key, problem string)) {
	switch a.Kind {
	case "", AgentClaudeCode:
	default:
		report("kind", fmt.Sprintf(`%q is not an agent parley runs: write "claude-code", or "" to let agents connect on their own`, a.Kind))
	}
	if strings.TrimSpace(a.Command) == "" {
		report("command", `empty; the agent's program, "claude" by default, or its path`)
	}
	switch a.Permissions {
	case PermissionsAsk, PermissionsAllow:
	default:
		report("permissions", fmt.Sprintf(`%q is not one of ask (the session's people answer each prompt), allow (the agent's own settings decide)`, a.Permissions))
	}
	if a.MaxRunning < 1 {
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

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
