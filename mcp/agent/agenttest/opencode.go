package agenttest

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// OpenCodeVersion is the OpenCode release the tests run: npm opencode-ai
// at exactly this version; the Makefile's opencode target installs the
// same one.
const OpenCodeVersion = "1.18.33"

// OpenCodeDirEnv names the environment variable holding the directory
// OpenCode was installed into (the npm prefix, with node_modules/.bin/
// opencode in it); make test sets it. Without it the Makefile's default
// cache is used.
const OpenCodeDirEnv = "PARLEY_OPENCODE_DIR"

// OpenCodeModel is the model opencode.json names when the test names none:
// one OpenCode's bundled catalogue knows, so it needs no model list from
// the network.
const OpenCodeModel = "claude-sonnet-4-5"

// OpenCodeBin returns the path of the opencode binary, or ends the test
// (Missing) when it is not installed.
func OpenCodeBin(tb testing.TB) string {
	tb.Helper()
	return installed(tb, "OpenCode "+OpenCodeVersion, OpenCodeDirEnv, "opencode-"+OpenCodeVersion, "opencode")
}

// OpenCodeConfig says how to set OpenCode up.
type OpenCodeConfig struct {
	// WorkDir is the session's working directory, where opencode.json is
	// written; "" makes one.
	WorkDir string
	// Model is the Anthropic model id; "" is OpenCodeModel.
	Model string
	// AskBash makes OpenCode ask (session/request_permission) before
	// each shell command: "permission": {"bash": "ask"}. Without it
	// OpenCode runs them.
	AskBash bool
}

// OpenCode sets OpenCode up to run `opencode acp` offline against api: an
// opencode.json in the work dir whose anthropic provider's baseURL is the
// fake's, and a private HOME, XDG directories and TMPDIR so that it reads
// and writes nothing outside the test. It ends the test when OpenCode is
// not installed (Missing).
func OpenCode(tb testing.TB, api *modeltest.Messages, c OpenCodeConfig) Agent {
	tb.Helper()
	bin := OpenCodeBin(tb)
	home, work, env := dirs(tb, c.WorkDir)
	model := c.Model
	if model == "" {
		model = OpenCodeModel
	}
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"model":   "anthropic/" + model,
		"provider": map[string]any{"anthropic": map[string]any{"options": map[string]string{
			"baseURL": api.URL + "/v1",
			"apiKey":  modeltest.AnthropicKey,
		}}},
	}
	if c.AskBash {
		cfg["permission"] = map[string]string{"bash": "ask"}
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		tb.Fatalf("agenttest: %v", err)
	}
	writeFile(tb, filepath.Join(work, "opencode.json"), string(b)+"\n")
	off := NewOffline(tb)
	env = append(env,
		// Spare the network calls OpenCode would make at start: its model
		// catalogue (it has one built in), updates, LSP servers. It
		// still tries to npm-install @opencode-ai/plugin into its config
		// directory in the background: Offline refuses that.
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_LSP_DOWNLOAD=1",
		"OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
	)
	env = append(env, off.Env()...)
	return Agent{Name: "OpenCode", Command: []string{bin, "acp"}, Env: env, WorkDir: work, Home: home, Offline: off}
}

// OpenCodeBash is a tool call of OpenCode's shell tool, for the Messages
// fake's script.
func OpenCodeBash(command, description string) modeltest.Block {
	return modeltest.Tool("bash", map[string]string{"command": command, "description": description})
}

// OpenCodeMCPTool is the name under which OpenCode offers the model tool
// of the MCP server named server in session/new.
func OpenCodeMCPTool(server, tool string) string { return server + "_" + tool }
