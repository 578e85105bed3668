package claudetest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// ClaudeCodeVersion is the Claude Code CLI release the tests run: npm
// @anthropic-ai/claude-code at exactly this version; the Makefile's
// claude-code target installs the same one. Its stream-json output, control
// protocol and API requests are what this package and the driver were
// written against.
const ClaudeCodeVersion = "2.1.328"

// DirEnv names the environment variable holding the directory Claude Code
// was installed into (the npm prefix, with node_modules/.bin/claude in it);
// `make test` sets it. Without it the Makefile's default cache is used.
const DirEnv = "PARLEY_CLAUDE_CODE_DIR"

// APIKey is the key Env gives the CLI and the fake API accepts; any other
// key is refused with Anthropic's 401.
const APIKey = modeltest.AnthropicKey

// Dir returns the directory Claude Code is installed in: $DirEnv, or the
// Makefile's default cache.
func Dir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "parley", "claude-code-"+ClaudeCodeVersion)
}

// CLI returns the path of the claude binary the tests run. It skips the
// test when it is missing (fails it where test dependencies are required:
// agenttest.Missing).
func CLI(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(Dir(), "node_modules", ".bin", "claude")
	if _, err := os.Stat(bin); err != nil {
		agenttest.Missing(tb, fmt.Sprintf("no Claude Code CLI at %s (%s): run make test-deps", bin, DirEnv))
	}
	return bin
}

// Env returns a complete environment for a claude process that talks only
// to the fake API at apiURL: PATH (so its Bash tool finds commands), its
// own HOME and TMPDIR under tb.TempDir() (the CLI writes its transcripts,
// settings and sockets there), the API's URL and key, and the switches that
// stop it from phoning home. Use it as exec.Cmd.Env, or as the driver's
// ExtraEnv (which allows the CLAUDE* switch the base environment may not
// carry).
func Env(tb testing.TB, apiURL string) []string {
	tb.Helper()
	dir := tb.TempDir()
	home := filepath.Join(dir, "home")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			tb.Fatalf("claudetest: %v", err)
		}
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	return []string{
		"PATH=" + path,
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"ANTHROPIC_BASE_URL=" + apiURL,
		"ANTHROPIC_API_KEY=" + APIKey,
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}
