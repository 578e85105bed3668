package agenttest_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// ended is a testing.TB that records how Missing ended the test instead of
// ending it.
type ended struct {
	testing.TB
	how, msg string
}

var errEnded = errors.New("ended")

func (e *ended) Skip(args ...any)  { e.how, e.msg = "skip", args[0].(string); panic(errEnded) }
func (e *ended) Fatal(args ...any) { e.how, e.msg = "fatal", args[0].(string); panic(errEnded) }

// run calls f with e and recovers the end it recorded.
func (e *ended) run(f func(testing.TB)) {
	defer func() {
		if r := recover(); r != nil && r != errEnded {
			panic(r)
		}
	}()
	f(e)
}

// TestMissing: a missing agent skips the test with the install hint, and
// fails it where dependencies are required (CI, PARLEY_TEST_DEPS).
func TestMissing(t *testing.T) {
	t.Setenv(agenttest.OpenCodeDirEnv, t.TempDir())
	t.Setenv(agenttest.CodexACPDirEnv, t.TempDir())
	for _, c := range []struct{ ci, deps, want string }{
		{"", "", "skip"},
		{"", "required", "fatal"},
		{"true", "", "fatal"},
	} {
		t.Setenv("CI", c.ci)
		t.Setenv("PARLEY_TEST_DEPS", c.deps)
		for _, find := range []func(testing.TB) string{
			func(tb testing.TB) string { return agenttest.OpenCodeBin(tb) },
			func(tb testing.TB) string { return agenttest.CodexACPBin(tb) },
		} {
			e := &ended{TB: t}
			e.run(func(tb testing.TB) { find(tb) })
			if e.how != c.want || !strings.Contains(e.msg, "make test-deps") || !strings.Contains(e.msg, "PARLEY_") {
				t.Errorf("CI=%q PARLEY_TEST_DEPS=%q: %s %q", c.ci, c.deps, e.how, e.msg)
			}
		}
	}
}

// fakeInstall makes an npm prefix holding an empty bin, and points env at
// it: enough for the setup, which does not run the agent.
func fakeInstall(t *testing.T, env, bin string) string {
	dir := t.TempDir()
	path := filepath.Join(dir, "node_modules", ".bin", bin)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv(env, dir)
	return path
}

func envMap(env []string) map[string]string {
	m := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := m[k]; dup {
			m[k] = "<twice>"
			continue
		}
		m[k] = v
	}
	return m
}

// checkPrivate: the environment is whole and the agent's own, under the
// test's directory.
func checkPrivate(t *testing.T, a agenttest.Agent) map[string]string {
	t.Helper()
	env := envMap(a.Env)
	for _, k := range []string{"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"} {
		if !strings.HasPrefix(env[k], filepath.Dir(a.Home)) {
			t.Errorf("%s=%q is not the test's", k, env[k])
		}
	}
	if env["HOME"] != a.Home || env["PWD"] != a.WorkDir || env["PATH"] == "" || env["HTTPS_PROXY"] != a.Offline.URL ||
		!strings.Contains(env["NO_PROXY"], "127.0.0.1") {
		t.Errorf("env %v", a.Env)
	}
	for k := range env {
		if strings.HasPrefix(k, "ANTHROPIC_") && a.Name != "Claude Code" {
			t.Errorf("%s in the env: it would take precedence over the config", k)
		}
	}
	return env
}

func TestOpenCodeSetup(t *testing.T) {
	bin := fakeInstall(t, agenttest.OpenCodeDirEnv, "opencode")
	api := modeltest.NewMessages(t)
	work := filepath.Join(t.TempDir(), "project")
	a := agenttest.OpenCode(t, api, agenttest.OpenCodeConfig{WorkDir: work, AskBash: true})
	if !slices.Equal(a.Command, []string{bin, "acp"}) || a.WorkDir != work {
		t.Fatalf("agent %+v", a)
	}
	env := checkPrivate(t, a)
	if env["OPENCODE_DISABLE_MODELS_FETCH"] != "1" {
		t.Errorf("env %v", a.Env)
	}
	b, err := os.ReadFile(filepath.Join(work, "opencode.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Model    string `json:"model"`
		Provider struct {
			Anthropic struct {
				Options struct{ BaseURL, APIKey string }
			} `json:"anthropic"`
		} `json:"provider"`
		Permission map[string]string `json:"permission"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Model != "anthropic/"+agenttest.OpenCodeModel || cfg.Provider.Anthropic.Options.BaseURL != api.URL+"/v1" ||
		cfg.Provider.Anthropic.Options.APIKey != modeltest.AnthropicKey || cfg.Permission["bash"] != "ask" {
		t.Fatalf("opencode.json %s", b)
	}
	a = agenttest.OpenCode(t, api, agenttest.OpenCodeConfig{Model: "claude-haiku-4-5"})
	b, _ = os.ReadFile(filepath.Join(a.WorkDir, "opencode.json"))
	if strings.Contains(string(b), "permission") || !strings.Contains(string(b), `"anthropic/claude-haiku-4-5"`) {
		t.Fatalf("opencode.json without AskBash %s", b)
	}
}

func TestCodexSetup(t *testing.T) {
	bin := fakeInstall(t, agenttest.CodexACPDirEnv, "codex-acp")
	api := modeltest.NewResponses(t)
	a := agenttest.Codex(t, api, agenttest.CodexConfig{})
	if !slices.Equal(a.Command, []string{bin}) {
		t.Fatalf("agent %+v", a)
	}
	env := checkPrivate(t, a)
	if env["OPENAI_API_KEY"] != modeltest.OpenAIKey {
		t.Errorf("env %v", a.Env)
	}
	var cfg struct {
		Model          string `toml:"model"`
		ModelProvider  string `toml:"model_provider"`
		ApprovalPolicy string `toml:"approval_policy"`
		SandboxMode    string `toml:"sandbox_mode"`
		Providers      map[string]struct {
			Name    string `toml:"name"`
			BaseURL string `toml:"base_url"`
			EnvKey  string `toml:"env_key"`
			WireAPI string `toml:"wire_api"`
		} `toml:"model_providers"`
	}
	md, err := toml.DecodeFile(filepath.Join(a.Home, ".codex", "config.toml"), &cfg)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Providers[cfg.ModelProvider]
	if len(md.Undecoded()) != 0 || cfg.SandboxMode != "danger-full-access" || cfg.Model != agenttest.CodexModel || cfg.ApprovalPolicy != "untrusted" ||
		p.BaseURL != api.URL+"/v1" || p.EnvKey != "OPENAI_API_KEY" || p.WireAPI != "responses" {
		t.Fatalf("config.toml %+v (undecoded %v)", cfg, md.Undecoded())
	}
}
