package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/mcp"
)

// home is the environment most tests run in: nothing but HOME.
var home = []string{"HOME=/home/ada"}

// known is what cmd/parley's table tells Load in a build with Telegram
// and Slack.
var known = Platforms{Present: []platform.Platform{telegram.Platform, slack.Platform}, Absent: []string{"matrix", "discord"}}

// every is what it tells Load in a build with every platform.
var every = Platforms{Present: []platform.Platform{telegram.Platform, slack.Platform, matrix.Platform}, Absent: []string{"discord"}}

// telegramOf and slackOf are c's sections of the platforms.
func telegramOf(c Config) *telegram.Config {
	s, _ := c.PlatformSection("telegram")
	return s.(*telegram.Config)
}

func slackOf(c Config) *slack.Config {
	s, _ := c.PlatformSection("slack")
	return s.(*slack.Config)
}

// writeFile writes a config file into a fresh temporary directory.
func writeFile(tb testing.TB, text string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "parley.toml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// load loads text (no file if empty) with env and fails on error.
func load(tb testing.TB, text string, env []string) Config {
	tb.Helper()
	path := ""
	if text != "" {
		path = writeFile(tb, text)
	}
	c, err := Load(path, env, known)
	if err != nil {
		tb.Fatalf("Load: %v", err)
	}
	return c
}

// loadErr loads text with env and returns the error's message, failing if
// there is none.
func loadErr(tb testing.TB, text string, env []string) (path, msg string) {
	tb.Helper()
	if text != "" {
		path = writeFile(tb, text)
	}
	_, err := Load(path, env, known)
	if err == nil {
		tb.Fatalf("Load(%q, %q) succeeded, want an error", text, env)
	}
	return path, err.Error()
}

func TestDefaults(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DataDir:    "/home/ada/.local/share/parley",
		Retention:  Duration{30 * 24 * time.Hour},
		FilesMaxMB: 2048,
		Store:      Store{BackupKeep: DefaultBackupKeep},
		HTTP:       HTTP{Listen: "127.0.0.1:8765"},
		Log:        Log{Level: "info", Format: "text"},
		Outbox: Outbox{
			FlushInterval: Duration{time.Second},
			DrainTimeout:  Duration{5 * time.Second},
		},
		Cleanup: Cleanup{NextNotice: true, NextInput: true, TurnComplete: true},
		MCP:     MCP{NoAgentNotice: mcp.DefaultNoAgentNotice, SendDirs: mcp.DefaultSendDirs(), MaxSessions: int64(mcp.DefaultMaxSessions)},
		Agent:   Agent{Workdir: wd, Permissions: "ask", MaxRunning: 4},
		Platforms: []PlatformSection{
			{Name: "telegram", Section: &telegram.Config{APIURL: "https://api.telegram.org", Mode: "polling"}},
			{Name: "slack", Section: &slack.Config{APIURL: "https://slack.com/api/", Mode: "socket", EventsPath: "/slack/events"}},
		},
	}
	if got := load(t, "", home); !reflect.DeepEqual(got, want) {
		t.Errorf("Load with no file:\n got %#v\nwant %#v", got.Redacted(), want)
	}
	// An empty file is the same as none.
	if got := load(t, "# nothing\n", home); !reflect.DeepEqual(got, want) {
		t.Errorf("Load with an empty file: got %#v", got)
	}
	if got := defaults(home, known.Present); !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: got %#v", got)
	}
	if Default().HTTP.Listen != "127.0.0.1:8765" {
		t.Errorf("Default().HTTP.Listen = %q", Default().HTTP.Listen)
	}
	for _, enabled := range []bool{telegramOf(want).Enabled(), slackOf(want).Enabled(), want.Transcription.Enabled()} {
		if enabled {
			t.Error("an adapter is enabled by default")
		}
	}
}

func TestDefaultDataDir(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"HOME=/home/ada"}, "/home/ada/.local/share/parley"},
		{[]string{"HOME=/home/ada", "XDG_DATA_HOME=/data"}, "/data/parley"},
		{[]string{"HOME=/home/ada", "XDG_DATA_HOME=relative"}, "/home/ada/.local/share/parley"},
		{[]string{"HOME=/home/ada", "XDG_DATA_HOME="}, "/home/ada/.local/share/parley"},
		{[]string{"XDG_DATA_HOME=/data"}, "/data/parley"},
		{nil, ""},
	}
	for _, tt := range tests {
		if got := DefaultDataDir(tt.env); got != tt.want {
			t.Errorf("DefaultDataDir(%q) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

func TestLoadFile(t *testing.T) {
	c, err := Load("testdata/full.toml", home, known)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		DataDir:    "/srv/parley",
		Retention:  Duration{90 * 24 * time.Hour},
		FilesMaxMB: 512,
		Store:      Store{URL: "postgres://parley:pg-store-password@db.example.org:5432/parley", BackupDir: "/home/ada/parley-backups", BackupKeep: 14},
		HTTP:       HTTP{Listen: "0.0.0.0:9000", Token: "http-secret-token", AllowedHosts: []string{"parley.example.org", "192.0.2.7"}},
		Log:        Log{Level: "debug", Format: "json"},
		Outbox: Outbox{
			FlushInterval: Duration{250 * time.Millisecond},
			DrainTimeout:  Duration{10 * time.Second},
		},
		Cleanup: Cleanup{NextNotice: false, NextInput: true, TurnComplete: false},
		Routing: Routing{ReflectInput: true},
		MCP:     MCP{NoAgentNotice: "Nobody reads this session yet; your message waits.", SendDirs: []string{"/srv/parley/out"}, MaxSessions: 16},
		Agent: Agent{Kind: "claude-code", Command: "/opt/claude/bin/claude", Args: []string{"--model", "opus"}, Workdir: "/",
			Permissions: "allow", MaxRunning: 2, Env: []string{"ANTHROPIC_API_KEY=sk-ant-agent-secret", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=8000"}},
		Platforms: []PlatformSection{{Name: "telegram", Section: &telegram.Config{
			Token:          "123456:telegram-secret-token",
			APIURL:         "http://127.0.0.1:8081",
			ChatID:         -1001234567890,
			AllowedUsers:   []int64{11111111, 22222222},
			Mode:           "webhook",
			WebhookURL:     "https://parley.example.org/telegram",
			WebhookSecret:  "webhook-secret_1",
			NewFromGeneral: true,
		}}, {Name: "slack", Section: &slack.Config{
			BotToken:      "xoxb-slack-secret-token",
			AppToken:      "xapp-slack-secret-token",
			APIURL:        "http://127.0.0.1:9090/api/",
			Channel:       "C0123ABCD",
			AllowedUsers:  []string{"U0123ABCD", "W0456EFGH"},
			Mode:          "events",
			SigningSecret: "slack-signing-secret",
			EventsPath:    "/hooks/slack",
		}}},
		Transcription: Transcription{
			APIURL: "https://stt.example.org/v1",
			APIKey: "sk-transcription-secret",
			Model:  "whisper-1",
		},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("Load(full.toml):\n got %+v\nwant %+v", c.Redacted(), want.Redacted())
	}
	for name, enabled := range map[string]bool{"telegram": telegramOf(c).Enabled(), "slack": slackOf(c).Enabled(),
		"transcription": c.Transcription.Enabled()} {
		if !enabled {
			t.Errorf("%s not enabled", name)
		}
	}
}

func TestEnvOverridesFile(t *testing.T) {
	file := `
data_dir = "/from/file"
[http]
listen = "127.0.0.1:1111"
[log]
level = "warn"
[outbox]
flush_interval = "3s"
[cleanup]
next_input = true
[telegram]
token = "file-token"
chat_id = -100
allowed_users = [1, 2]
api_url = "https://tg.example.org"
webhook_secret = "from-file"
[transcription]
api_url = "https://stt.example.org/v1"
model = "file-model"
`
	env := withHome(
		"PARLEY_DATA_DIR=/from/env",
		"PARLEY_HTTP_LISTEN=127.0.0.1:2222",
		"PARLEY_LOG_LEVEL=DEBUG", // levels are case-insensitive
		"PARLEY_OUTBOX_FLUSH_INTERVAL=1m30s",
		"PARLEY_OUTBOX_DRAIN_TIMEOUT=0s",
		"PARLEY_CLEANUP_NEXT_INPUT=false",
		"PARLEY_TELEGRAM_CHAT_ID=-1009",
		"PARLEY_TELEGRAM_ALLOWED_USERS= 7, 8 ,9",
		"PARLEY_TELEGRAM_MODE=webhook",
		"PARLEY_TELEGRAM_WEBHOOK_URL=https://parley.example.org/tg",
		"PARLEY_TELEGRAM_NEW_FROM_GENERAL=true",
		"PARLEY_TELEGRAM_API_URL=", // empty counts as unset
		"PARLEY_TRANSCRIPTION_MODEL=whisper-2",
		"PARLEY_LOG_FORMAT=text",
		"PARLEY_LOG_FORMAT=json", // the last one wins
	)
	c := load(t, file, env)
	checks := []struct {
		key       string
		got, want any
	}{
		{"data_dir", c.DataDir, "/from/env"},
		{"http.listen", c.HTTP.Listen, "127.0.0.1:2222"},
		{"log.level", c.Log.Level, "debug"},
		{"log.format", c.Log.Format, "json"},
		{"outbox.flush_interval", c.Outbox.FlushInterval.Duration, 90 * time.Second},
		{"outbox.drain_timeout", c.Outbox.DrainTimeout.Duration, time.Duration(0)},
		{"cleanup.next_input", c.Cleanup.NextInput, false},
		{"cleanup.next_notice (default kept)", c.Cleanup.NextNotice, true},
		{"telegram.token (file kept)", telegramOf(c).Token, "file-token"},
		{"telegram.chat_id", telegramOf(c).ChatID, int64(-1009)},
		{"telegram.allowed_users", telegramOf(c).AllowedUsers, []int64{7, 8, 9}},
		{"telegram.mode", telegramOf(c).Mode, "webhook"},
		{"telegram.webhook_url", telegramOf(c).WebhookURL, "https://parley.example.org/tg"},
		{"telegram.new_from_general", telegramOf(c).NewFromGeneral, true},
		{"telegram.webhook_secret (file kept)", telegramOf(c).WebhookSecret, "from-file"},
		{"telegram.api_url (empty variable ignored)", telegramOf(c).APIURL, "https://tg.example.org"},
		{"transcription.model", c.Transcription.Model, "whisper-2"},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.key, ch.got, ch.want)
		}
	}
}

// withHome is home plus more variables.
func withHome(vars ...string) []string { return append(append([]string(nil), home...), vars...) }

// lookup returns the value of the key in c.
func lookup(c Config, key string) reflect.Value {
	for _, f := range fields(&c) {
		if f.key == key {
			return f.v
		}
	}
	panic("no key " + key)
}

// TestEveryKeyHasAVariable sets each key through its variable alone, so a
// key added to Config without a way to set it from the environment fails.
func TestEveryKeyHasAVariable(t *testing.T) {
	names := map[string]string{}
	for _, f := range fields(&Config{Platforms: newSections(every.Present)}) {
		if other, dup := names[f.env]; dup {
			t.Errorf("%s and %s share the variable %s", f.key, other, f.env)
		}
		names[f.env] = f.key
		if !regexp.MustCompile(`^PARLEY_[A-Z0-9_]+$`).MatchString(f.env) ||
			f.env != "PARLEY_"+strings.ToUpper(strings.ReplaceAll(f.key, ".", "_")) {
			t.Errorf("%s: variable %s", f.key, f.env)
		}

		def := lookup(defaults(home, every.Present), f.key)
		var value string
		switch v := def.Interface().(type) {
		case string:
			value = "value-of-" + f.key
		case bool:
			value = fmt.Sprint(!v)
		case int64:
			value = "42"
		case Duration:
			value = "42s"
		case []string:
			value = "a,b"
		case []int64:
			value = "4,2"
		default:
			t.Errorf("%s: no sample value for type %T", f.key, v)
			continue
		}
		want := reflect.New(def.Type()).Elem()
		if err := setText(want, value); err != nil {
			t.Fatalf("%s: %v", f.key, err)
		}
		c, _ := Load("", withHome(f.env+"="+value), every) // validation may object
		got := lookup(c, f.key)
		if !reflect.DeepEqual(got.Interface(), want.Interface()) || reflect.DeepEqual(got.Interface(), def.Interface()) {
			t.Errorf("%s=%s: %s = %#v, want %#v (default %#v)", f.env, value, f.key, got, want, def)
		}
	}
	for env, key := range map[string]string{
		"PARLEY_DATA_DIR":              "data_dir",
		"PARLEY_HTTP_LISTEN":           "http.listen",
		"PARLEY_OUTBOX_FLUSH_INTERVAL": "outbox.flush_interval",
		"PARLEY_TELEGRAM_CHAT_ID":      "telegram.chat_id",
		"PARLEY_CLEANUP_TURN_COMPLETE": "cleanup.turn_complete",
	} {
		if names[env] != key {
			t.Errorf("%s sets %q, want %s", env, names[env], key)
		}
	}
}

func TestValidation(t *testing.T) {
	const telegramOK = "[telegram]\ntoken = \"t\"\nchat_id = -100\nallowed_users = [1]\n"
	tests := []struct {
		name   string
		file   string
		env    []string
		noHome bool
		want   []string // substrings of the error
	}{
		{name: "log format", env: []string{"PARLEY_LOG_FORMAT=yaml"},
			want: []string{`config: log.format: "yaml" is not one of text, json (set [log] format or PARLEY_LOG_FORMAT)`}},
		{name: "log level", file: "[log]\nlevel = \"verbose\"\n",
			want: []string{`log.level: "verbose" is not one of debug, info, warn, error`, "PARLEY_LOG_LEVEL"}},
		{name: "listen without port", env: []string{"PARLEY_HTTP_LISTEN=localhost"},
			want: []string{`http.listen: "localhost" is not host:port`, "PARLEY_HTTP_LISTEN"}},
		{name: "listen with a bad port", env: []string{"PARLEY_HTTP_LISTEN=127.0.0.1:http"},
			want: []string{`http.listen: "127.0.0.1:http" has no port number`}},
		{name: "listen on all interfaces without token", env: []string{"PARLEY_HTTP_LISTEN=0.0.0.0:8765"},
			want: []string{"http.listen", "http.token is required", "PARLEY_HTTP_TOKEN", "bind 127.0.0.1"}},
		{name: "listen on an empty host without token", env: []string{"PARLEY_HTTP_LISTEN=:8765"},
			want: []string{"http.listen", "http.token is required"}},
		{name: "short token beyond loopback", env: []string{"PARLEY_HTTP_LISTEN=0.0.0.0:8765", "PARLEY_HTTP_TOKEN=s3cret"},
			want: []string{"config: http.token: shorter than 16 characters", "openssl rand -hex 32", "(set [http] token or PARLEY_HTTP_TOKEN)"}},
		{name: "blank token beyond loopback", file: "[http]\nlisten = \"192.0.2.1:80\"\ntoken = \"                    \"\n",
			want: []string{"config: http.token: shorter than 16 characters", "http.token: begins or ends with white space"}},
		{name: "token with white space", env: []string{"PARLEY_HTTP_TOKEN=0123456789abcdef "},
			want: []string{"http.token: begins or ends with white space", "openssl rand -hex 32"}},
		{name: "no token beyond loopback names the fix", env: []string{"PARLEY_HTTP_LISTEN=0.0.0.0:8765"},
			want: []string{"openssl rand -hex 32"}},
		{name: "allowed host with a scheme", env: []string{"PARLEY_HTTP_ALLOWED_HOSTS=good.example.org,https://parley.example.org"},
			want: []string{`config: http.allowed_hosts: item 2, "https://parley.example.org", is not a host name or address`, "without scheme, port or path", "PARLEY_HTTP_ALLOWED_HOSTS"}},
		{name: "allowed host with a port", file: "[http]\nallowed_hosts = [\"parley.example.org:443\"]\n",
			want: []string{`http.allowed_hosts: item 1, "parley.example.org:443", is not a host name`}},
		{name: "flush interval not a duration", env: []string{"PARLEY_OUTBOX_FLUSH_INTERVAL=soon"},
			want: []string{`config: PARLEY_OUTBOX_FLUSH_INTERVAL: "soon" is not a duration like 2s`}},
		{name: "flush interval zero", file: "[outbox]\nflush_interval = \"0s\"\n",
			want: []string{"outbox.flush_interval: 0s is not positive", "PARLEY_OUTBOX_FLUSH_INTERVAL"}},
		{name: "drain timeout negative", env: []string{"PARLEY_OUTBOX_DRAIN_TIMEOUT=-1s"},
			want: []string{"outbox.drain_timeout: -1s is negative"}},
		{name: "bool not a bool", env: []string{"PARLEY_CLEANUP_NEXT_INPUT=maybe"},
			want: []string{`PARLEY_CLEANUP_NEXT_INPUT: "maybe" is not a boolean`}},
		{name: "int not an int", env: []string{"PARLEY_TELEGRAM_CHAT_ID=-100x"},
			want: []string{`PARLEY_TELEGRAM_CHAT_ID: "-100x" is not an integer`}},
		{name: "int list item not an int", env: []string{"PARLEY_TELEGRAM_ALLOWED_USERS=1,bob"},
			want: []string{`PARLEY_TELEGRAM_ALLOWED_USERS: "1,bob": item 2: "bob" is not an integer`}},
		{name: "telegram mode", file: telegramOK + "mode = \"push\"\n",
			want: []string{`telegram.mode: "push" is not one of polling, webhook (set [telegram] mode or PARLEY_TELEGRAM_MODE)`}},
		{name: "webhook without url", file: telegramOK + "mode = \"webhook\"\n",
			want: []string{"telegram.webhook_url: required when telegram.mode is webhook", "PARLEY_TELEGRAM_WEBHOOK_URL"}},
		{name: "webhook without secret", file: telegramOK + "mode = \"webhook\"\nwebhook_url = \"https://parley.example.org/tg\"\n",
			want: []string{"telegram.webhook_secret: required when telegram.mode is webhook", "openssl rand -hex 32",
				"1-256 characters of A-Z, a-z, 0-9, _ and -", "PARLEY_TELEGRAM_WEBHOOK_SECRET"}},
		{name: "webhook url not a url", file: telegramOK + "mode = \"webhook\"\nwebhook_url = \"parley.example.org/hook\"\n",
			want: []string{`telegram.webhook_url: "parley.example.org/hook" is not an http or https URL`}},
		{name: "telegram without chat and users", env: []string{"PARLEY_TELEGRAM_TOKEN=t"},
			want: []string{"telegram.chat_id: required", "PARLEY_TELEGRAM_CHAT_ID", "telegram.allowed_users: empty", "PARLEY_TELEGRAM_ALLOWED_USERS"}},
		{name: "telegram user id not positive", file: "[telegram]\ntoken = \"t\"\nchat_id = -100\nallowed_users = [-5]\n",
			want: []string{"telegram.allowed_users: -5 is not a user id"}},
		{name: "telegram keys without token", file: "[telegram]\nchat_id = -100\n",
			want: []string{"telegram.token: empty, but other [telegram] keys are set", "PARLEY_TELEGRAM_TOKEN"}},
		{name: "telegram api url emptied", file: telegramOK + "api_url = \"\"\n",
			want: []string{"telegram.api_url: empty", "PARLEY_TELEGRAM_API_URL"}},
		{name: "telegram webhook secret malformed", file: telegramOK + "webhook_secret = \"not allowed!\"\n",
			want: []string{"telegram.webhook_secret: must be 1-256 characters", "(set [telegram] webhook_secret or PARLEY_TELEGRAM_WEBHOOK_SECRET)"}},
		{name: "telegram api url not a url", env: []string{"PARLEY_TELEGRAM_API_URL=ftp://user:pw@tg.example.org"},
			want: []string{`telegram.api_url: "ftp://user:xxxxx@tg.example.org" is not an http or https URL`, "(set [telegram] api_url or PARLEY_TELEGRAM_API_URL)"}},
		{name: "transcription api url not a url", env: []string{"PARLEY_TRANSCRIPTION_API_URL=stt.example.org"},
			want: []string{`transcription.api_url: "stt.example.org" is not an http or https URL`, "PARLEY_TRANSCRIPTION_API_URL"}},
		{name: "transcription without url", env: []string{"PARLEY_TRANSCRIPTION_MODEL=whisper-1"},
			want: []string{"transcription.api_url: empty, but other [transcription] keys are set", "PARLEY_TRANSCRIPTION_API_URL"}},
		{name: "retention shorter than a day", env: []string{"PARLEY_RETENTION=1h"},
			want: []string{"config: retention: 1h0m0s is shorter than a day", "use 30d, or at least 24h", "(set retention or PARLEY_RETENTION)"}},
		{name: "retention not a duration", file: "retention = \"a month\"\n",
			want: []string{`retention: "a month" is not a duration like 2s`}},
		{name: "store url of another engine", env: []string{"PARLEY_STORE_URL=mysql://parley:pg-secret-pw@127.0.0.1/parley"},
			want: []string{`config: store.url: its scheme "mysql" is not postgres or postgresql`, "postgres://parley:PASSWORD@127.0.0.1:5432/parley",
				"remove it to keep the bbolt file in data_dir", "(set [store] url or PARLEY_STORE_URL)"}},
		{name: "store url without a host", file: "[store]\nurl = \"postgres:///parley\"\n",
			want: []string{"config: store.url: names no host", "PARLEY_STORE_URL"}},
		{name: "no data dir", noHome: true,
			want: []string{"data_dir: empty", "(set data_dir or PARLEY_DATA_DIR)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := withHome(tt.env...)
			if tt.noHome {
				env = tt.env
			}
			_, msg := loadErr(t, tt.file, env)
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
		})
	}
}

func TestValidConfigs(t *testing.T) {
	tests := []struct {
		name string
		env  []string
	}{
		{"loopback ipv6", []string{"PARLEY_HTTP_LISTEN=[::1]:8765"}},
		{"localhost", []string{"PARLEY_HTTP_LISTEN=localhost:0"}},
		{"public with token", []string{"PARLEY_HTTP_LISTEN=0.0.0.0:8765", "PARLEY_HTTP_TOKEN=0123456789abcdef"}},
		{"short token on loopback", []string{"PARLEY_HTTP_TOKEN=s3cret"}},
		{"allowed hosts", []string{"PARLEY_HTTP_ALLOWED_HOSTS=parley.example.org,Chat.Example.ORG.,192.0.2.7,[2001:db8::1],2001:db8::2,localhost"}},
		{"telegram polling", []string{"PARLEY_TELEGRAM_TOKEN=t", "PARLEY_TELEGRAM_CHAT_ID=-100", "PARLEY_TELEGRAM_ALLOWED_USERS=1"}},
		{"telegram webhook", []string{"PARLEY_TELEGRAM_TOKEN=t", "PARLEY_TELEGRAM_CHAT_ID=-100", "PARLEY_TELEGRAM_ALLOWED_USERS=1",
			"PARLEY_TELEGRAM_MODE=webhook", "PARLEY_TELEGRAM_WEBHOOK_URL=https://x.example.org/tg", "PARLEY_TELEGRAM_WEBHOOK_SECRET=abc_DEF-1"}},
		{"log level in capitals", []string{"PARLEY_LOG_LEVEL=WARN"}},
		{"store on postgres", []string{"PARLEY_STORE_URL=postgres://parley:pw@127.0.0.1:5432/parley?sslmode=disable"}},
		{"store on postgresql by socket", []string{"PARLEY_STORE_URL=postgresql:///parley?host=/run/postgresql"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			load(t, "", withHome(tt.env...))
		})
	}
}

// TestBadValuesDoNotHideOthers: a value the decoder cannot take (a
// duration that is not one, a string for a number) no longer stops the
// file's reading: every such value and every other rule's problem are
// reported together, each at its line.
func TestBadValuesDoNotHideOthers(t *testing.T) {
	path := writeFile(t, "retention = \"a month\"\n[log]\nlevel = \"loud\"\n[outbox]\nflush_interval = \"soon\"\ndrain_timeout = 5\n[telegram]\nchat_id = \"x\"\n[lgo]\nlevel = 1\n")
	_, err := Load(path, withHome(), every)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, w := range []string{
		path + `:1: retention: "a month" is not a duration like 2s`,
		`log.level: "loud" is not one of debug, info, warn, error`,
		path + `:5: outbox.flush_interval: "soon" is not a duration like 2s`,
		path + `:6: outbox.drain_timeout: "5" is not a duration like 2s`,
		path + `:8: telegram.chat_id: incompatible types`,
		path + `:9: unknown table [lgo] (did you mean log?)`,
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not contain %q:\n%s", w, msg)
		}
	}
}

func TestAllProblemsReported(t *testing.T) {
	_, msg := loadErr(t, "[log]\nlevel = \"loud\"\nformat = \"xml\"\n[http]\nlisten = \"nope\"\n",
		withHome("PARLEY_OUTBOX_FLUSH_INTERVAL=soon", "PARLEY_TELEGRAM_MODE=carrier-pigeon"))
	for _, w := range []string{"log.level", "log.format", "http.listen", "PARLEY_OUTBOX_FLUSH_INTERVAL", "telegram.mode"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not mention %s:\n%s", w, msg)
		}
	}
	if n := strings.Count(msg, "\n") + 1; n < 5 {
		t.Errorf("%d problems reported, want at least 5:\n%s", n, msg)
	}
}

func TestUnknownKeys(t *testing.T) {
	path, msg := loadErr(t, `data_dri = "/x"

[telegram]
tokn = "secret"

[nosuch]
a = 1
b = 2

[log]
colour = true

[telegam]
token = "x"
`, home)
	for _, w := range []string{
		path + ":1: unknown key data_dri (did you mean data_dir?)",
		path + ":4: unknown key telegram.tokn (did you mean telegram.token?)",
		path + ":6: unknown table [nosuch]",
		path + ":11: unknown key log.colour (known keys in [log]: format, level)",
		path + ":13: unknown table [telegam] (did you mean telegram?)",
	} {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not contain %q:\n%s", w, msg)
		}
	}
	if strings.Contains(msg, "nosuch.a") {
		t.Errorf("keys under an unknown table reported one by one:\n%s", msg)
	}
	if strings.Contains(msg, "secret") {
		t.Errorf("error shows a value:\n%s", msg)
	}
}

// TestNoTestAdapterSection: the in-memory test adapter is no platform
// people can configure; its old section is an unknown one, and its
// variable an unknown one too.
func TestNoTestAdapterSection(t *testing.T) {
	path, msg := loadErr(t, "[fake]\nenabled = true\n", home)
	if want := path + ":1: unknown table [fake]"; !strings.Contains(msg, want) {
		t.Errorf("error does not contain %q:\n%s", want, msg)
	}
	if got := UnknownEnv([]string{"PARLEY_FAKE_ENABLED=true"}, every); !reflect.DeepEqual(got, []string{"PARLEY_FAKE_ENABLED"}) {
		t.Errorf("UnknownEnv = %q", got)
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string
	}{
		{"syntax", "[http]\nlisten = = \"127.0.0.1:1\"\n", []string{":2: expected value"}},
		{"syntax without a key", "[log]\nlevel = \"info\"\nb c\n", []string{":3: expected '.' or '='"}},
		{"unterminated string", "data_dir = \"/x\n", []string{":1: "}},
		{"wrong type", "[http]\n\nlisten = 8765\n", []string{":3: http.listen: incompatible types"}},
		{"bad duration", "[outbox]\nflush_interval = \"soon\"\n",
			[]string{`:2: outbox.flush_interval: "soon" is not a duration like 2s`}},
		{"duration without unit", "[outbox]\ndrain_timeout = 5\n",
			[]string{`:2: outbox.drain_timeout: "5" is not a duration like 2s`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, msg := loadErr(t, tt.file, home)
			if !strings.HasPrefix(msg, "config: "+path+":") {
				t.Errorf("error does not start with the file: %s", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
		})
	}

	_, err := Load(filepath.Join(t.TempDir(), "missing.toml"), home, known)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want os.ErrNotExist", err)
	}
}

func TestRedaction(t *testing.T) {
	c, err := Load("testdata/full.toml", withHome(
		"PARLEY_TRANSCRIPTION_API_URL=https://user:url-secret-password@stt.example.org/v1"), known)
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{
		c.HTTP.Token, telegramOf(c).Token, telegramOf(c).WebhookSecret, c.Transcription.APIKey, "url-secret-password",
		"sk-ant-agent-secret", "8000", "pg-store-password",
	}
	var text, js bytes.Buffer
	slog.New(slog.NewTextHandler(&text, nil)).Info("config", "config", c)
	slog.New(slog.NewJSONHandler(&js, nil)).Info("config", "config", c)
	outputs := map[string]string{
		"String":         c.String(),
		"%v":             fmt.Sprintf("%v", c),
		"%+v":            fmt.Sprintf("%+v", c),
		"%#v":            fmt.Sprintf("%#v", c),
		"%s of pointer":  fmt.Sprintf("%s", &c),
		"Redacted %+v":   fmt.Sprintf("%+v", *telegramOf(c.Redacted())),
		"slog text":      text.String(),
		"slog json":      js.String(),
		"redacted field": c.Redacted().Transcription.APIKey,
	}
	for name, out := range outputs {
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("%s shows the secret %q:\n%s", name, s, out)
			}
		}
		if !strings.Contains(out, "***") {
			t.Errorf("%s shows no redaction marker:\n%s", name, out)
		}
	}
	// What is not secret is still shown.
	for _, w := range []string{`listen = "0.0.0.0:9000"`, `flush_interval = "250ms"`, "11111111", "stt.example.org", "user:xxxxx@",
		`env = ["ANTHROPIC_API_KEY=***", "CLAUDE_CODE_MAX_OUTPUT_TOKENS=***"]`} {
		if !strings.Contains(outputs["String"], w) {
			t.Errorf("String does not show %s:\n%s", w, outputs["String"])
		}
	}
	if !strings.Contains(js.String(), `"flush_interval":"250ms"`) {
		t.Errorf("slog json: %s", js.String())
	}
	// Redacting copies: the original keeps its secrets.
	if c.Redacted(); c.HTTP.Token != "http-secret-token" {
		t.Errorf("Redacted changed the original: %q", c.HTTP.Token)
	}
	r := c.Redacted()
	telegramOf(r).AllowedUsers[0] = 0
	if telegramOf(c).AllowedUsers[0] == 0 {
		t.Error("Redacted shares slices with the original")
	}
	// An unset secret stays visibly unset.
	if got := load(t, "", home).Redacted().HTTP.Token; got != "" {
		t.Errorf("empty token redacted to %q", got)
	}
}

func TestErrorsNeverShowSecrets(t *testing.T) {
	const secret = "bad secret value!"
	_, msg := loadErr(t, "", withHome(
		"PARLEY_TELEGRAM_TOKEN="+secret,
		"PARLEY_TELEGRAM_WEBHOOK_SECRET="+secret,
		"PARLEY_HTTP_LISTEN=0.0.0.0:1",
		"PARLEY_MATRIX_ACCESS_TOKEN="+secret,
		"PARLEY_TRANSCRIPTION_API_URL=ftp://u:"+secret+"@x",
		"PARLEY_STORE_URL=mysql://u:"+secret+"@x",
	))
	if strings.Contains(msg, secret) || strings.Contains(msg, "bad secret") {
		t.Errorf("error shows a secret:\n%s", msg)
	}
	if !strings.Contains(msg, "telegram.webhook_secret") {
		t.Errorf("invalid webhook secret not reported:\n%s", msg)
	}
	if !strings.Contains(msg, "store.url") {
		t.Errorf("invalid store url not reported:\n%s", msg)
	}
}

func TestDataDirTilde(t *testing.T) {
	c := load(t, "data_dir = \"~/parley-data\"\n", home)
	if c.DataDir != "/home/ada/parley-data" {
		t.Errorf("data_dir = %q", c.DataDir)
	}
}

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{"PARLEY_HTTP_LISTEN=x", "PARLEY_HTTP_LISTN=x", "PARLEY_TELEGRAM_TOKEN=x", "PATH=/bin", "PARLEY_NOPE=1"}, known)
	if want := []string{"PARLEY_HTTP_LISTN", "PARLEY_NOPE"}; !reflect.DeepEqual(got, want) {
		t.Errorf("UnknownEnv = %q, want %q", got, want)
	}
}

func TestSlogLevel(t *testing.T) {
	for level, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo,
		"warn": slog.LevelWarn, "error": slog.LevelError, "": slog.LevelInfo, "bogus": slog.LevelInfo} {
		if got := (Log{Level: level}).SlogLevel(); got != want {
			t.Errorf("SlogLevel(%q) = %v, want %v", level, got, want)
		}
	}
}

func TestDurationDays(t *testing.T) {
	tests := []struct {
		text string
		want time.Duration
		back string
	}{
		{"30d", 30 * 24 * time.Hour, "30d"},
		{"720h", 30 * 24 * time.Hour, "30d"},
		{"36h", 36 * time.Hour, "36h0m0s"},
		{"2s", 2 * time.Second, "2s"},
		{"0d", 0, "0s"},
	}
	for _, tt := range tests {
		var d Duration
		if err := d.UnmarshalText([]byte(tt.text)); err != nil || d.Duration != tt.want {
			t.Errorf("UnmarshalText(%q) = %v, %v; want %v", tt.text, d.Duration, err, tt.want)
		}
		if b, _ := d.MarshalText(); string(b) != tt.back {
			t.Errorf("MarshalText(%v) = %q, want %q", d.Duration, b, tt.back)
		}
	}
	for _, bad := range []string{"d", "-3d", "1.5d", "30 d", "99999999d"} {
		var d Duration
		if err := d.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("UnmarshalText(%q) = %v, want an error", bad, d.Duration)
		}
	}
	c := load(t, "retention = \"90d\"\n", home)
	if c.Retention.Duration != 90*24*time.Hour {
		t.Errorf("retention = %v, want 90 days", c.Retention)
	}
}
