package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
)

// agentTimeout bounds each command the agent check runs: `claude
// --version` answers in about 50 ms here and `claude auth status` in about
// 200 ms, so a command that takes seconds is hung, not slow.
const agentTimeout = 10 * time.Second

// claudeCodeTested is the Claude Code version parley's tests run
// (the Makefile's claude-code target installs it).
const claudeCodeTested = "2.1.328"

// installFix is how to get the agent of kind, or point parley at it (key:
// where its command is set): for Claude Code the same words the agent's
// start failure gives people.
func installFix(kind, key string) string {
	return serve.InstallHints[kind] + ", or set " + key + " to its path"
}

// agentKeys says where the keys of one agent are set: [agent] or
// [agents.NAME], and their variables.
type agentKeys string

// key is where key k of the agent is set (config.AgentKey).
func (n agentKeys) key(k string) string { return config.AgentKey(string(n), k) }

// checkAgents checks every agent parley runs, one finding each: "agent"
// for [agent], "agent NAME" for a named one; and says when it runs none.
func (c *checkup) checkAgents(ctx context.Context) []finding {
	run := c.cfg.RunAgents()
	if len(run) == 0 {
		return []finding{{Check: "agent", OK: true,
			Detail: `none run by parley ([agent] kind is empty): agents connect on their own over MCP; kind = "claude-code", "opencode", "codex", "gemini" or "acp" (PARLEY_AGENT_KIND) has parley run that agent for each session`}}
	}
	out := make([]finding, 0, len(run))
	for _, na := range run {
		out = append(out, c.checkAgent(ctx, na.Name, na.Agent))
	}
	return out
}

// checkAgent checks the agent name (a) as parley would run it: that this
// build runs its protocol, then what its kind allows to check without
// starting a conversation (which would cost a model call): Claude Code's
// version and login, an ACP agent's answer to initialize.
func (c *checkup) checkAgent(ctx context.Context, name string, a config.Agent) finding {
	check := "agent"
	if name != config.DefaultAgentName {
		check = "agent " + name
	}
	keys := agentKeys(name)
	if err := serve.AgentSupported(name, a); err != nil {
		return finding{Check: check, Problem: err.Error(), Fix: "set " + keys.key("kind") + ` to "claude-code", or use a build of parley that runs it`}
	}
	var f finding
	if a.ACP() {
		f = c.checkACP(ctx, keys, a)
	} else {
		f = c.checkClaudeCode(ctx, keys, a)
	}
	f.Check = check
	return f
}

// lookPath finds command as the agent's start would: on the PATH of its
// environment, or relative to its working directory.
func lookPath(command string, env []string, dir string) (string, error) {
	if strings.Contains(command, "/") {
		if !filepath.IsAbs(command) {
			command = filepath.Join(dir, command)
		}
		st, err := os.Stat(command)
		switch {
		case err != nil:
			return "", err
		case st.IsDir() || st.Mode().Perm()&0o111 == 0:
			return "", fs.ErrPermission
		}
		return command, nil
	}
	for _, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			for d := range strings.SplitSeq(p, ":") {
				if d == "" {
					continue
				}
				if st, err := os.Stat(filepath.Join(d, command)); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
					return filepath.Join(d, command), nil
				}
			}
		}
	}
	return "", exec.ErrNotFound
}

// checkClaudeCode checks Claude Code: that its command runs (`<command>
// --version`, in the agent's working directory and environment, as the
// orchestrator would start it), which version it is, and that it can
// reach the API as someone (`<command> auth status`: an API key in its
// environment or a login).
func (c *checkup) checkClaudeCode(ctx context.Context, keys agentKeys, a config.Agent) finding {
	timeout := cmp.Or(c.agentTimeout, agentTimeout)
	env := agentEnv(c.env, a.Env)
	out, err := runAgent(ctx, timeout, a, env, "--version")
	if err != nil {
		return agentFailure(keys, a, "--version", timeout, out, err)
	}
	version := strings.TrimSpace(firstLine(out))
	var notes []string
	if !strings.Contains(version, "Claude Code") {
		notes = append(notes, fmt.Sprintf("warning: %s --version says %q, not Claude Code: check that %s is Claude Code", a.Command, version, keys.key("command")))
	} else if v := semver.FindString(version); v != "" && v != claudeCodeTested {
		notes = append(notes, fmt.Sprintf("parley is tested with Claude Code %s", claudeCodeTested))
	}
	if a.Workdir == "/" {
		// A service started without a working directory of its own
		// (systemd's system units) would have the agent work in the root.
		notes = append(notes, "warning: it works in /; set "+keys.key("workdir")+" to the project it should work on")
	}
	auth, err := agentAuth(ctx, timeout, a, env)
	switch {
	case err != nil:
		notes = append(notes, "authentication not checked ("+err.Error()+"); a session's first message says so if it fails")
	case !auth.LoggedIn:
		return finding{
			Problem: fmt.Sprintf("%s runs (%s) but is not logged in, and ANTHROPIC_API_KEY is not set in its environment", a.Command, version),
			Fix: "set ANTHROPIC_API_KEY in parley's environment or in " + keys.key("env") + ", " +
				"or log in once as the user parley runs as (with its HOME): claude auth login"}
	default:
		how := "logged in"
		if auth.Method != "" {
			how += " (" + auth.Method
			if auth.KeySource != "" {
				how += " from " + auth.KeySource
			}
			how += ")"
		}
		notes = append([]string{how}, notes...)
	}
	detail := fmt.Sprintf("%s runs: %s, %s; works in %s, permissions %s", a.Command, version, strings.Join(notes, "; "), a.Workdir, a.Permissions)
	if keys == config.DefaultAgentName {
		detail += fmt.Sprintf(", at most %d at once", a.MaxRunning)
	}
	return finding{OK: true, Detail: detail}
}

// semver finds a version number in a --version line.
var semver = regexp.MustCompile(`\d+\.\d+\.\d+`)

// agentEnv is the environment the agent gets: parley's own without the
// CLAUDE* variables it may have inherited (when parley itself runs inside
// Claude Code they would make the agent think it is nested) and without
// parley's own PARLEY_* configuration, then the agent's env.
func agentEnv(env, extra []string) []string {
	out := make([]string, 0, len(env)+len(extra))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CLAUDE") && !strings.HasPrefix(kv, "PARLEY_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// maxAgentOutput bounds what is kept of a checked command's output.
const maxAgentOutput = 64 << 10

// runAgent runs the agent's command with args in its working directory,
// and returns its standard output. Its standard error is kept in the
// error of a failed run.
func runAgent(ctx context.Context, timeout time.Duration, a config.Agent, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, a.Command, args...)
	cmd.Dir = a.Workdir
	cmd.Env = env
	var stdout, stderr capped
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// A child the command started may hold its output open after the
	// command was killed at the deadline: stop waiting for it.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if ctx.Err() == context.DeadlineExceeded {
		return stdout.String(), context.DeadlineExceeded
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return stdout.String(), &exitFailure{err: ee, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.String(), err
}

// exitFailure is a command that ran and exited unsuccessfully.
type exitFailure struct {
	err    *exec.ExitError
	stderr string
}

func (e *exitFailure) Error() string {
	if e.stderr == "" {
		return e.err.Error()
	}
	return e.err.Error() + ": " + lastBytes(e.stderr, 300)
}

func (e *exitFailure) Unwrap() error { return e.err }

// agentFailure says why the agent's command could not be run (with args;
// "" when it was only looked for), and the fix.
func agentFailure(keys agentKeys, a config.Agent, args string, timeout time.Duration, out string, err error) finding {
	const check = "agent"
	command := a.Command
	run := command + " " + args
	installFix := installFix(a.Kind, keys.key("command"))
	var exitErr *exitFailure
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return finding{Check: check, Problem: fmt.Sprintf("the agent command %q is not installed (not found on PATH)", command), Fix: installFix}
	case errors.Is(err, fs.ErrNotExist):
		return finding{Check: check, Problem: fmt.Sprintf("the agent command %q does not exist", command), Fix: installFix}
	case errors.Is(err, fs.ErrPermission):
		return finding{Check: check, Problem: fmt.Sprintf("the agent command %q cannot be run: %v", command, errors.Unwrap(err)),
			Fix: fmt.Sprintf("make it executable (chmod +x %s), or %s", command, installFix)}
	case errors.Is(err, syscall.ENOEXEC):
		return finding{Check: check, Problem: fmt.Sprintf("the agent command %q is not a program this machine runs (exec format error)", command),
			Fix: "re" + installFix}
	case errors.Is(err, context.DeadlineExceeded):
		return finding{Check: check, Problem: fmt.Sprintf("`%s` did not answer within %s", run, timeout),
			Fix: fmt.Sprintf("run `%s` yourself to see what it waits for; %s", run, installFix)}
	case errors.As(err, &exitErr):
		problem := fmt.Sprintf("`%s` failed (%v)", run, exitErr.err)
		if exitErr.stderr != "" {
			problem += ": " + lastBytes(exitErr.stderr, 300)
		}
		return finding{Check: check, Problem: problem,
			Fix: fmt.Sprintf("run `%s` yourself to see why; reinstall Claude Code (npm install -g @anthropic-ai/claude-code), or set %s to one that runs", run, keys.key("command"))}
	}
	return finding{Check: check, Problem: fmt.Sprintf("the agent command %q cannot be run: %v", command, err), Fix: installFix}
}

// claudeAuth is what `claude auth status --json` says (2.1.328: it exits
// 1 when not logged in, with the same JSON).
type claudeAuth struct {
	LoggedIn  bool   `json:"loggedIn"`
	Method    string `json:"authMethod"`
	KeySource string `json:"apiKeySource"`
}

// agentAuth asks Claude Code whether it can reach the API as someone. An
// error means the answer is unknown (an older version, a wrapper), not
// that it is logged out.
func agentAuth(ctx context.Context, timeout time.Duration, a config.Agent, env []string) (claudeAuth, error) {
	out, err := runAgent(ctx, timeout, a, env, "auth", "status", "--json")
	var auth claudeAuth
	var exitErr *exitFailure
	if err != nil && !errors.As(err, &exitErr) {
		return auth, fmt.Errorf("%s auth status: %w", a.Command, err)
	}
	var raw map[string]json.RawMessage
	if jerr := json.Unmarshal([]byte(out), &raw); jerr != nil || raw["loggedIn"] == nil {
		return auth, fmt.Errorf("%s auth status gave no status", a.Command)
	}
	if jerr := json.Unmarshal([]byte(out), &auth); jerr != nil {
		return auth, fmt.Errorf("%s auth status: %w", a.Command, jerr)
	}
	return auth, nil
}

// capped keeps the first maxAgentOutput bytes written to it.
type capped struct{ bytes.Buffer }

func (c *capped) Write(p []byte) (int, error) {
	if room := maxAgentOutput - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// lastBytes is the last n bytes of s, marked as cut when it was.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
