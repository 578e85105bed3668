package claudetest

import (
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	env := Env(t, "http://127.0.0.1:1")
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if got[k] == "" {
			t.Errorf("no %s", k)
		}
	}
	if got["ANTHROPIC_BASE_URL"] != "http://127.0.0.1:1" || got["ANTHROPIC_API_KEY"] != APIKey ||
		got["DISABLE_TELEMETRY"] != "1" || got["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] != "1" {
		t.Fatalf("env %v", env)
	}
	if got["HOME"] == got["TMPDIR"] {
		t.Fatal("HOME and TMPDIR are one directory")
	}
}
