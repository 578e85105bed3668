package agenttest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Agent is an ACP agent set up to run offline in a test: its command line,
// a complete environment of its own, and the directories it was given.
type Agent struct {
	// Name is the agent's name for messages: "OpenCode", "Codex".
	Name string
	// Command is the ACP command line: the installed binary and its
	// arguments.
	Command []string
	// Env is the agent's whole environment (use it as exec.Cmd.Env, not
	// appended to the test's own): PATH, a private HOME, XDG directories
	// and TMPDIR under the test's temporary directory, PWD set to WorkDir,
	// the fake model API's key, and Offline's proxy.
	Env []string
	// WorkDir is the working directory for session/new (its cwd) and
	// for the process, with the agent's project configuration in it.
	WorkDir string
	// Home is the agent's HOME, where it keeps its sessions.
	Home string
	// Offline records what the agent tried to reach beyond loopback.
	Offline *Offline
}

// Missing ends a test whose dependency is not installed: it skips it with
// msg, or fails it where the dependencies are required — when the CI
// variable is set, or PARLEY_TEST_DEPS=required (make test sets it after
// installing them): there a missing dependency is a broken setup, not a
// reason to test less.
func Missing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" || os.Getenv("PARLEY_TEST_DEPS") == "required" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// installed returns the path of the binary bin that npm installed under
// the directory $dirEnv (or the Makefile's default cache, cacheName under
// ~/.cache/parley); Missing when it is not there.
func installed(tb testing.TB, what, dirEnv, cacheName, bin string) string {
	tb.Helper()
	dir := os.Getenv(dirEnv)
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			Missing(tb, fmt.Sprintf("no %s: %s is not set and there is no home directory: run make test-deps", what, dirEnv))
		}
		dir = filepath.Join(home, ".cache", "parley", cacheName)
	}
	path := filepath.Join(dir, "node_modules", ".bin", bin)
	if _, err := os.Stat(path); err != nil {
		Missing(tb, fmt.Sprintf("no %s at %s (%s): run make test-deps", what, path, dirEnv))
	}
	return path
}

// dirs makes the agent's private directories under the test's temporary
// directory: home (its HOME), tmp (its TMPDIR) and, when workDir is "",
// work. It returns the base environment every agent gets.
func dirs(tb testing.TB, workDir string) (home, work string, env []string) {
	tb.Helper()
	base := tb.TempDir()
	home, tmp, work := filepath.Join(base, "home"), filepath.Join(base, "tmp"), workDir
	if work == "" {
		work = filepath.Join(base, "work")
	}
	for _, d := range []string{home, tmp, work} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatalf("agenttest: %v", err)
		}
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return home, work, []string{
		"PATH=" + path,
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		// OpenCode has been seen to find its project configuration from
		// $PWD rather than its working directory. Over ACP here,
		// session/new's cwd was enough (with PWD naming another directory
		// it still read the work dir's opencode.json); PWD is the work
		// dir all the same, as parley sets it.
		"PWD=" + work,
	}
}

// writeFile writes a configuration file, making its directory.
func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		tb.Fatalf("agenttest: %v", err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatalf("agenttest: %v", err)
	}
}
