package config

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/core"
)

// probeSection is the section of a platform this package knows nothing
// of.
type probeSection struct {
	// Token enables the probe.
	Token string `toml:"token" secret:"true"`
	// Users are admitted.
	Users []string `toml:"users"`
}

func (s probeSection) Enabled() bool     { return s.Token != "" }
func (s probeSection) Allowed() []string { return s.Users }
func (s probeSection) Validate(report func(key, problem string)) {
	if s.Enabled() && len(s.Users) == 0 {
		report("users", "empty; list who may use the probe")
	}
}

var probe = platform.Of(platform.Def[probeSection]{Name: "probe", Doc: "Probe is a test's platform.",
	KeyDocs: map[string]string{"token": "token enables the probe.", "users": "users are admitted."},
	Default: func() probeSection { return probeSection{Users: []string{"root"}} },
	New: func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
		return nil, nil
	}})

// TestAnyPlatformsSection: a platform's section is read, set from the
// environment, checked, redacted and shown in the example from the
// platform alone, with nothing of it in this package.
func TestAnyPlatformsSection(t *testing.T) {
	p := Platforms{Present: []platform.Platform{probe}}
	c, err := Load(writeFile(t, "[probe]\ntoken = \"probe-secret\"\n"), withHome("PARLEY_PROBE_USERS=ann,bob"), p)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.PlatformSection("probe")
	if got := s.(*probeSection); !ok || got.Token != "probe-secret" || strings.Join(got.Users, ",") != "ann,bob" {
		t.Errorf("section %+v", s)
	}
	if out := c.String(); strings.Contains(out, "probe-secret") || !strings.Contains(out, "[probe]") {
		t.Errorf("String:\n%s", out)
	}

	_, err = Load(writeFile(t, "[probe]\ntoken = \"x\"\nusers = []\ntokn = 1\n"), withHome(), p)
	for _, w := range []string{"probe.users: empty; list who may use the probe (set [probe] users or PARLEY_PROBE_USERS)",
		"unknown key probe.tokn (did you mean probe.token?)"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v, want %q", err, w)
		}
	}

	ex := string(Example(withHome(), p))
	for _, w := range []string{"# Probe is a test's platform.\n[probe]\n", "# token enables the probe.\n# Environment: PARLEY_PROBE_TOKEN\n# token = \"\"\n",
		"# Environment: PARLEY_PROBE_USERS\n# users = [\"root\"]\n"} {
		if !strings.Contains(ex, w) {
			t.Errorf("example lacks %q:\n%s", w, ex)
		}
	}
	if got := UnknownEnv([]string{"PARLEY_PROBE_TOKEN=x", "PARLEY_TELEGRAM_TOKEN=x"}, p); strings.Join(got, ",") != "PARLEY_TELEGRAM_TOKEN" {
		t.Errorf("UnknownEnv = %q", got)
	}
}
