package agenttest

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// CodexACPVersion is the release of Zed's ACP adapter for Codex the tests
// run: npm @zed-industries/codex-acp at exactly this version (it embeds
// Codex 0.137.0); the Makefile's codex-acp target installs the same one.
const CodexACPVersion = "0.16.0"

// CodexACPDirEnv names the environment variable holding the directory
// codex-acp was installed into (the npm prefix, with node_modules/.bin/
// codex-acp in it); make test sets it. Without it the Makefile's default
// cache is used.
const CodexACPDirEnv = "PARLEY_CODEX_ACP_DIR"

// CodexModel is the model config.toml names when the test names none: one
// Codex knows. With a name it does not know, Codex says so to people in
// the chat at the start of every session ("Model metadata for `…` not
// found"), as an agent_message_chunk.
const CodexModel = "gpt-5.4-mini"

// CodexProvider is the name of the fake's table in config.toml
// ([model_providers.parley-test]).
const CodexProvider = "parley-test"

// CodexACPBin returns the path of the codex-acp command, or ends the test
// (Missing) when it is not installed. It is npm's Node.js launcher, which
// runs the native binary as its child: kill the process group.
func CodexACPBin(tb testing.TB) string {
	tb.Helper()
	return installed(tb, "codex-acp "+CodexACPVersion, CodexACPDirEnv, "codex-acp-"+CodexACPVersion, "codex-acp")
}

// CodexConfig says how to set Codex up.
type CodexConfig struct {
	// WorkDir is the session's working directory; "" makes one.
	WorkDir string
	// Model is the model id; "" is CodexModel.
	Model string
}

// Codex sets Codex up to run `codex-acp` offline against api: a
// $HOME/.codex/config.toml under a private HOME whose provider's base_url
// is the fake's, and the key in OPENAI_API_KEY (the provider's env_key).
//
// Codex asks (session/request_permission) before every shell command
// outside its list of safe read-only ones (approval_policy "untrusted":
// `ls` and `cat` run at once, `touch` and redirections ask) and before
// every call of an MCP server's tool. Its commands run unsandboxed
// (sandbox_mode "danger-full-access"): its Linux sandbox needs bubblewrap,
// and where there is none every sandboxed command fails with exit status
// 101 — so without it the commands Codex runs unasked would fail here.
func Codex(tb testing.TB, api *modeltest.Responses, c CodexConfig) Agent {
	tb.Helper()
	bin := CodexACPBin(tb)
	home, work, env := dirs(tb, c.WorkDir)
	model := c.Model
	if model == "" {
		model = CodexModel
	}
	// The keys are Codex's (https://developers.openai.com/codex/config-reference).
	cfg := fmt.Sprintf(`model = %s
model_provider = %s
approval_policy = "untrusted"
sandbox_mode = "danger-full-access"

[model_providers.%s]
name = "parley's test model"
base_url = %s
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`, strconv.Quote(model), strconv.Quote(CodexProvider), CodexProvider, strconv.Quote(api.URL+"/v1"))
	writeFile(tb, filepath.Join(home, ".codex", "config.toml"), cfg)
	off := NewOffline(tb)
	env = append(env, "OPENAI_API_KEY="+modeltest.OpenAIKey)
	env = append(env, off.Env()...)
	return Agent{Name: "Codex", Command: []string{bin}, Env: env, WorkDir: work, Home: home, Offline: off}
}

// CodexShell is a tool call of Codex's shell tool (exec_command), for the
// Responses fake's script.
func CodexShell(command string) modeltest.Block {
	return modeltest.Tool("exec_command", map[string]string{"cmd": command})
}

// CodexMCPTool is a tool call of tool of the MCP server named server in
// session/new: Codex declares each server's tools in a namespace tool
// mcp__SERVER, and the model calls them by name within it.
func CodexMCPTool(server, tool string, input any) modeltest.Block {
	return modeltest.Block{Tool: &modeltest.ToolCall{Name: tool, Namespace: "mcp__" + server, Input: input}}
}
