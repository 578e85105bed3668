package claudecode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"syscall"

	"github.com/parley-chat/parley/mcp/agent"
)

// ErrNoConversation is Start's error when resume was asked for a
// conversation Claude Code has no transcript of: it was never started, or
// its first turn was killed before Claude Code wrote it. The caller starts
// it afresh with resume=false. It is agent.ErrNoConversation, which the
// orchestrator knows for every driver.
var ErrNoConversation = agent.ErrNoConversation

// Problem is a failure people can act on: what went wrong and what fixes
// it, in words for the people of a session. It is agent.Problem, which the
// orchestrator posts as it is, whatever the driver.
type Problem = agent.Problem

// defaultCommandKey is where [agent]'s command is set: Options.CommandKey's
// default.
const defaultCommandKey = "[agent] command (PARLEY_AGENT_COMMAND)"

// startProblem turns an error of exec.Cmd.Start into a Problem when it is
// one people can fix: its Fix names key, where the command is set.
func startProblem(command, key string, err error) error {
	if key == "" {
		key = defaultCommandKey
	}
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return &Problem{
			Cause: fmt.Sprintf("the agent command %q is not installed (not found on PATH)", command),
			Fix:   "install Claude Code: npm install -g @anthropic-ai/claude-code, or set " + key, Err: err,
		}
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.ENOEXEC):
		return &Problem{
			Cause: fmt.Sprintf("the agent command %q cannot be run", command),
			Fix:   "make it an executable Claude Code binary, or set " + key,
			Err:   err,
		}
	}
	return fmt.Errorf("claudecode: start %s: %w", command, err)
}

// checkWorkdir makes a missing working directory a Problem of its own:
// exec reports it as the same "no such file" as a missing command.
func checkWorkdir(dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	if err == nil && !st.IsDir() {
		err = fmt.Errorf("not a directory")
	}
	if err != nil {
		return &Problem{
			Cause: fmt.Sprintf("the agent's working directory %q cannot be used", dir),
			Fix:   "create it, or set [agent] workdir (PARLEY_AGENT_WORKDIR) to a directory that exists",
			Err:   err,
		}
	}
	return nil
}

// authProblem is the Problem for an authentication failure seen on stdout
// (see parsed.auth).
func authProblem(kind string) *Problem {
	if kind == "login" {
		return &Problem{
			Cause: "Claude Code is not logged in",
			Fix: "run claude and /login as the user parley runs as, or set ANTHROPIC_API_KEY in parley's " +
				"environment or in [agent] env",
		}
	}
	return &Problem{
		Cause: "the Anthropic API refused Claude Code's credentials (401 invalid x-api-key)",
		Fix: "set a valid ANTHROPIC_API_KEY in parley's environment or in [agent] env, or log in again " +
			"with claude /login as the user parley runs as",
	}
}
