package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The parley command, built once per run of the tests, for the tests that
// run it as a person or a service manager does: a `parley serve` child
// process killed with SIGKILL, the cluster's instances, the MCP server
// command Claude Code starts (`parley mcp --channel`), `parley pairing`
// typed by an operator. It is the binary users run, built from this
// module with the race detector when the tests have it (raceBuild).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// The exit codes of the parley command.
const (
	exitOK     = 0
	exitFailed = 1 // it failed while running
	exitUsage  = 2 // bad arguments or configuration
)

// runParley runs the parley command with args and only the environment
// env, as an operator types it, and returns its exit code and what it
// printed, standard output then standard error.
func runParley(tb testing.TB, env []string, args ...string) (int, string) {
	tb.Helper()
	cmd := exec.Command(parleyBin(tb), args...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		tb.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String() + errOut.String()
}

// parleyModule is the command's import path.
const parleyModule = "github.com/parley-chat/parley/cmd/parley"

// parleyBin returns the path of the parley binary, building it the first
// time.
func parleyBin(tb testing.TB) string {
	tb.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "parley-e2e-")
		if binErr != nil {
			return
		}
		binPath, binErr = buildParley(binDir, raceBuild)
	})
	if binErr != nil {
		tb.Fatal(binErr)
	}
	return binPath
}

// buildParley builds the parley command into dir, with the race detector
// when race is set, and returns the binary's path.
func buildParley(dir string, race bool) (string, error) {
	path := filepath.Join(dir, "parley")
	args := []string{"build", "-o", path}
	if race {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, parleyModule)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", parleyModule, err, out)
	}
	return path, nil
}
