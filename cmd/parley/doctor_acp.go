package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/acp"
	"github.com/parley-chat/parley/mcp/agent"
)

// acpProbeTimeout bounds the ACP check: the agent's start and its answer to
// initialize. OpenCode 1.18.33 took 2–21 s for initialize on 2 loaded
// cores (package acp), so a deadline of seconds would call a slow agent
// broken.
const acpProbeTimeout = time.Minute

// checkACP checks an ACP agent as parley starts it: the command is looked
// for, then started in the agent's working directory and environment, in
// a process group of its own, and asked ACP's initialize alone — no
// session, so no model call — and stopped (acp.Probe). It reports the
// agent's name, version and protocol version from its answer, and whether
// it offers what parley relies on: session/load (a conversation goes on
// after parley restarts) and MCP over HTTP (how parley's own tools reach
// it). Whether the agent can reach its model is seen at a session's first
// message. A parley already running this agent is not disturbed: the
// probe's process has a state directory of its own.
func (c *checkup) checkACP(ctx context.Context, keys agentKeys, a config.Agent) finding {
	env := agentEnv(c.env, nil)
	path, err := lookPath(a.Command, agentEnv(env, a.Env), a.Workdir)
	if err != nil {
		return agentFailure(keys, a, "", 0, "", err)
	}
	stateDir, err := os.MkdirTemp("", "parley-doctor-acp-")
	if err != nil {
		return finding{Problem: fmt.Sprintf("no temporary directory for the agent: %v", err),
			Fix: "set TMPDIR to a directory parley can write to"}
	}
	defer os.RemoveAll(stateDir)
	timeout := cmp.Or(c.agentTimeout, acpProbeTimeout)
	info, err := acp.Probe(ctx, acp.Options{
		Name:        a.Command,
		Command:     path,
		Args:        a.Args,
		Install:     installFix(a.Kind, keys.key("command")),
		Workdir:     a.Workdir,
		Env:         env,
		ExtraEnv:    a.Env,
		StateDir:    stateDir,
		CallTimeout: timeout,
	})
	run := strings.Join(append([]string{a.Command}, a.Args...), " ")
	if err != nil {
		return acpFailure(keys, a, run, err)
	}
	who := cmp.Or(strings.TrimSpace(info.Name+" "+info.Version), "an agent that gives no name")
	notes := []string{fmt.Sprintf("`%s` answers ACP: %s, protocol version %d", run, who, info.ProtocolVersion)}
	if info.LoadSession {
		notes = append(notes, "it continues conversations after parley restarts (loadSession)")
	} else {
		notes = append(notes, "warning: it cannot continue a conversation after parley restarts (no loadSession): its sessions then start afresh")
	}
	if info.MCPHTTP {
		notes = append(notes, "parley's tools reach it over HTTP (mcpCapabilities.http)")
	} else {
		notes = append(notes, "parley's tools reach it through `parley mcp` on stdio (no mcpCapabilities.http)")
	}
	notes = append(notes, "whether it reaches its model shows at a session's first message")
	if a.Workdir == "/" {
		notes = append(notes, "warning: it works in /; set "+keys.key("workdir")+" to the project it should work on")
	}
	return finding{OK: true, Detail: fmt.Sprintf("%s; works in %s, permissions %s", strings.Join(notes, "; "), a.Workdir, a.Permissions)}
}

// acpFailure says why the ACP agent did not answer initialize (run is its
// command line), and what to do: the keys named are the agent's own.
func acpFailure(keys agentKeys, a config.Agent, run string, err error) finding {
	var pr *agent.Problem
	if !errors.As(err, &pr) {
		return finding{Problem: fmt.Sprintf("`%s` could not be checked: %v", run, err),
			Fix: fmt.Sprintf("run `%s` yourself to see why", run)}
	}
	problem := pr.Cause
	if pr.Err != nil {
		problem += ": " + lastBytes(pr.Err.Error(), 300)
	}
	commandLine := fmt.Sprintf("%s and %s must start the agent speaking ACP on its standard input and output", keys.key("command"), keys.key("args"))
	if def := defaultACPLine[a.Kind]; def != "" {
		commandLine += " (" + def + ")"
	}
	var exitErr *exec.ExitError
	switch {
	case errors.Is(pr.Err, syscall.ENOEXEC), errors.Is(pr.Err, fs.ErrPermission):
		return agentFailure(keys, a, "", 0, "", pr.Err)
	case errors.Is(pr.Err, context.DeadlineExceeded):
		return finding{Problem: problem, Fix: fmt.Sprintf("run `%s` yourself to see what it waits for; %s", run, commandLine)}
	case errors.As(pr.Err, &exitErr) || strings.Contains(pr.Cause, "exited"):
		return finding{Problem: problem, Fix: fmt.Sprintf("run `%s` yourself to see why it exits; %s", run, commandLine)}
	case errors.Is(pr.Err, syscall.EPIPE):
		// It closed its standard input, exiting, before initialize was
		// written to it: the driver then sees the failed write first.
		return finding{Problem: fmt.Sprintf("`%s` stopped reading its standard input as it started (it exited, or closed it), before ACP's initialize", run),
			Fix: fmt.Sprintf("run `%s` yourself to see why it exits; %s", run, commandLine)}
	case pr.Err == nil:
		// What the agent said is not ACP as parley speaks it (another
		// protocol version): the driver's own fix says which.
		return finding{Problem: problem, Fix: pr.Fix}
	}
	return finding{Problem: problem, Fix: fmt.Sprintf("run `%s` yourself to see why it refuses; check the agent's own configuration and %s", run, commandLine)}
}

// defaultACPLine is each ACP kind's command line, for the fixes.
var defaultACPLine = map[string]string{
	config.AgentOpenCode: "OpenCode's: opencode acp",
	config.AgentGemini:   "Gemini CLI's: gemini --experimental-acp",
	config.AgentCodex:    "Codex's: codex-acp",
}
