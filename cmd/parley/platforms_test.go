package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// telegramConfig, slackConfig and matrixConfig are c's sections of the
// platforms, added with their defaults when c has none (config.Default).
func telegramConfig(c *config.Config) *telegram.Config {
	return c.SectionFor(telegram.Platform).(*telegram.Config)
}

func slackConfig(c *config.Config) *slack.Config { return c.SectionFor(slack.Platform).(*slack.Config) }

func matrixConfig(c *config.Config) *matrix.Config {
	return c.SectionFor(matrix.Platform).(*matrix.Config)
}

// probeSection is a test platform's configuration section.
type probeSection struct {
	on    bool
	users []string
}

func (s probeSection) Enabled() bool                  { return s.on }
func (s probeSection) Allowed() []string              { return s.users }
func (s probeSection) Validate(func(key, msg string)) {}

// testPlatform is a platform of tests' tables. The configuration has no
// section for it, so the table uses s, its defaults.
func testPlatform(name core.AdapterName, s probeSection, build func(context.Context, probeSection, platform.Deps) (core.Adapter, error)) platform.Platform {
	return platform.Of(platform.Def[probeSection]{Name: name, Default: func() probeSection { return s }, New: build})
}

// fakePlatform is the in-memory adapter (adapters/fake) as a platform
// named fake, enabled, admitting everyone: what tests add to a table for a
// platform that needs no server. It is not in the binary's table.
func fakePlatform() platform.Platform {
	return testPlatform("fake", probeSection{on: true}, func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
		return fake.New("fake", core.Capabilities{Markup: core.MarkupMarkdown, Buttons: true, DeleteOthers: true}), nil
	})
}

// admitAll is the allow-list tests give the adapters they build directly.
var admitAll = core.AuthorizerFunc(func(core.Origin, core.Actor) bool { return true })

// probeAdapter is the fake adapter with a Check, counting its calls.
type probeAdapter struct {
	*fake.Adapter
	checks   *int
	checkErr error
}

func (a probeAdapter) Check(context.Context) error { *a.checks++; return a.checkErr }

// TestTableDrivesConstruction registers a test platform in the table and
// checks that Main builds, checks, mounts and admits it from the table
// alone.
func TestTableDrivesConstruction(t *testing.T) {
	dir := t.TempDir()
	var got platform.Deps
	checks := 0
	probe := testPlatform("probe", probeSection{on: true, users: []string{"u1"}},
		func(_ context.Context, s probeSection, d platform.Deps) (core.Adapter, error) {
			got = d
			d.Route("/probe/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "probed") }))
			return probeAdapter{Adapter: fake.New("probe", core.Capabilities{Markup: core.MarkupMarkdown}), checks: &checks}, nil
		})
	off := testPlatform("off", probeSection{},
		func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
			t.Error("a disabled platform was built")
			return nil, errors.New("disabled")
		})
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = dir, "127.0.0.1:0"
	m := &serve.Main{Config: cfg, Platforms: []platform.Platform{probe, off, {Name: "absent"}}}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		m.Close()
	}()

	var names []string
	for _, a := range m.Daemon().Adapters() {
		names = append(names, string(a.Name()))
	}
	if want := []string{"probe", "web"}; !slices.Equal(names, want) {
		t.Errorf("adapters %q, want %q", names, want)
	}
	// The daemon starts the adapter with its Check.
	servetest.WaitHealth(t, m.Addr(), "probe up", func(h servetest.Health) bool { return h.Platforms["probe"].Up })
	if checks != 1 {
		t.Errorf("Check called %d times, want 1", checks)
	}
	if got.Files != m.Daemon().Files || got.Logger == nil || got.Store == nil || got.Handler == nil || got.Authorizer == nil || got.Transcriber != nil {
		t.Errorf("deps: %+v", got)
	}
	for actor, want := range map[string]bool{"u1": true, "intruder": false} {
		if ok := m.Daemon().Service.Authorized("probe", core.Actor{ID: actor}); ok != want {
			t.Errorf("probe admits %s: %v, want %v", actor, ok, want)
		}
	}
	if !m.Daemon().Service.Authorized("web", core.Actor{ID: "anyone"}) {
		t.Error("the web page's origin got an allow-list")
	}
	resp, err := http.Get("http://" + m.Addr() + "/probe/hook")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "probed" {
		t.Errorf("GET /probe/hook: %d %q", resp.StatusCode, body)
	}
}

func TestTableConstructionFailures(t *testing.T) {
	tests := []struct {
		name  string
		build func(context.Context, probeSection, platform.Deps) (core.Adapter, error)
		want  string
	}{
		{"constructor fails", func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
			return nil, errors.New("probe: no token")
		}, "probe: no token"},
		{"adapter misnamed", func(context.Context, probeSection, platform.Deps) (core.Adapter, error) {
			return fake.New("prob", core.Capabilities{}), nil
		}, "platform probe built an adapter named prob"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir, cfg.HTTP.Listen = t.TempDir(), "127.0.0.1:0"
			m := &serve.Main{Config: cfg, Platforms: []platform.Platform{testPlatform("probe", probeSection{on: true}, tt.build)}}
			err := m.Open(context.Background())
			if err == nil {
				m.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestConfigTelegramFromEnv loads a Telegram section from variables alone
// and checks what the table makes of it: its allow-list.
func TestConfigTelegramFromEnv(t *testing.T) {
	cfg, err := loadConfig("", []string{"HOME=/home/ada", "PARLEY_TELEGRAM_TOKEN=1:x",
		"PARLEY_TELEGRAM_CHAT_ID=-100", "PARLEY_TELEGRAM_ALLOWED_USERS=7,8"})
	if err != nil {
		t.Fatal(err)
	}
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	want := map[core.Origin][]string{"telegram": {"7", "8"}}
	if got := m.AllowLists(); !reflect.DeepEqual(got, want) {
		t.Errorf("allowLists = %q, want %q", got, want)
	}
	if got := (&serve.Main{Config: config.Default(), Platforms: platforms.All()}).AllowLists(); len(got) != 0 {
		t.Errorf("allowLists with no platform = %q", got)
	}
}

// TestServeRefusesAbsentPlatform configures platforms this build lacks,
// by file and by variable, through both commands that read the
// configuration.
func TestServeRefusesAbsentPlatform(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "parley.toml")
	if err := os.WriteFile(file, []byte("[discord]\ntoken = \"d-secret\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"serve, file", []string{"serve", "--config", file}, nil,
			file + ":1: [discord]: this build of parley has no Discord adapter (known platforms: telegram, slack, matrix); remove the section or use a build that includes it"},
		{"serve, variable", []string{"serve"}, []string{"PARLEY_DISCORD_TOKEN=d"},
			"PARLEY_DISCORD_TOKEN: this build of parley has no Discord adapter (known platforms: telegram, slack, matrix); unset it"},
		{"mcp, file", []string{"mcp", "--config", file}, nil, "[discord]: this build of parley has no Discord adapter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := append([]string{"PARLEY_DATA_DIR=" + dir}, tt.env...)
			var errOut bytes.Buffer
			if code := Run(context.Background(), tt.args, env, strings.NewReader(""), io.Discard, &errOut); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr: %s", code, exitUsage, errOut.String())
			}
			if !strings.Contains(errOut.String(), tt.want) {
				t.Errorf("stderr %q does not contain %q", errOut.String(), tt.want)
			}
			if strings.Contains(errOut.String(), "syt-secret") || strings.Contains(errOut.String(), "unknown") {
				t.Errorf("stderr: %s", errOut.String())
			}
		})
	}
}

// TestConfigSlackFromEnv loads a Slack section from variables alone and
// checks what the table makes of it: its allow-list, and in events mode
// the route its requests arrive on.
func TestConfigSlackFromEnv(t *testing.T) {
	cfg, err := loadConfig("", []string{"HOME=/home/ada", "PARLEY_SLACK_BOT_TOKEN=xoxb-1", "PARLEY_SLACK_CHANNEL=C0AB",
		"PARLEY_SLACK_ALLOWED_USERS=U1AB,U2CD", "PARLEY_SLACK_MODE=events", "PARLEY_SLACK_SIGNING_SECRET=s"})
	if err != nil {
		t.Fatal(err)
	}
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	want := map[core.Origin][]string{"slack": {"U1AB", "U2CD"}}
	if got := m.AllowLists(); !reflect.DeepEqual(got, want) {
		t.Errorf("allowLists = %q, want %q", got, want)
	}
	var routes []string
	a, err := slack.Platform.New(context.Background(), slackConfig(&cfg), platform.Deps{Authorizer: admitAll,
		Route: func(path string, _ http.Handler) { routes = append(routes, path) }})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "slack" || !reflect.DeepEqual(routes, []string{"/slack/events"}) {
		t.Errorf("built %s with routes %q", a.Name(), routes)
	}
}

// TestConfigMatrixFromEnv configures Matrix only by the PARLEY_MATRIX_*
// variables the end-to-end tests use, and builds the adapter from them.
func TestConfigMatrixFromEnv(t *testing.T) {
	cfg, err := loadConfig("", []string{"HOME=/home/ada", "PARLEY_MATRIX_HOMESERVER=http://127.0.0.1:8008",
		"PARLEY_MATRIX_USER_ID=@parley:localhost", "PARLEY_MATRIX_PASSWORD=pw",
		"PARLEY_MATRIX_ALLOWED_USERS=@ada:localhost,@bob:localhost", "PARLEY_MATRIX_SPACE=!space:localhost"})
	if err != nil {
		t.Fatal(err)
	}
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	want := map[core.Origin][]string{"matrix": {"@ada:localhost", "@bob:localhost"}}
	if got := m.AllowLists(); !reflect.DeepEqual(got, want) {
		t.Errorf("allowLists = %q, want %q", got, want)
	}
	st, err := bolt.Open(filepath.Join(t.TempDir(), "parley.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := matrix.Platform.New(context.Background(), matrixConfig(&cfg), platform.Deps{Store: st, Leases: st, Authorizer: admitAll})
	if err != nil {
		t.Fatal(err)
	}
	if a.Name() != "matrix" {
		t.Errorf("built %s", a.Name())
	}
	if _, err := matrix.Platform.New(context.Background(), matrixConfig(&cfg), platform.Deps{Authorizer: admitAll}); err == nil {
		t.Error("built the Matrix adapter without a store for its sync position")
	}
}
