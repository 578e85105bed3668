// Package config loads parley's configuration: one TOML file, every key of
// which an environment variable can override.
//
// A key in a section is overridden by PARLEY_<SECTION>_<KEY> ([http] listen
// by PARLEY_HTTP_LISTEN), a top-level key by PARLEY_<KEY> (data_dir by
// PARLEY_DATA_DIR). The variables are derived from the toml tags of Config by
// reflection, so a new key or section gets its variable without further
// code. Values are written as in TOML but bare: strings as they are, numbers
// in decimal, booleans as true or false, durations like 2s or 1m30s, lists
// comma-separated (PARLEY_TELEGRAM_ALLOWED_USERS=123,456). A variable set to
// the empty string counts as unset, as container tools set unset variables
// to "" — to clear a value, remove it from the file. When a variable appears
// more than once in the environment, the last one wins.
//
// Load reports every problem it finds at once (errors.Join), each naming the
// key and how to fix it. Unknown keys in the file are errors, since a
// misspelt key would otherwise silently leave its default in place.
//
// Secrets (tokens, API keys, webhook secrets) never appear in errors, and
// String, Redacted and LogValue replace them with "***" for logging.
package config

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Config is parley's whole configuration. The zero Config is not valid: start
// from Default or Load.
type Config struct {
	// DataDir is where parley keeps its database and received files.
	// Default: $XDG_DATA_HOME/parley, else ~/.local/share/parley. A leading
	// "~/" is expanded to $HOME.
	DataDir string `toml:"data_dir"`
	// HTTP is the daemon's one HTTP listener: web page, /api, /mcp, /metrics.
	HTTP HTTP `toml:"http"`
	// Log configures logging.
	Log Log `toml:"log"`
	// Outbox paces platform operations.
	Outbox Outbox `toml:"outbox"`
	// Cleanup switches the cleanup ledger's automatic deletions.
	Cleanup Cleanup `toml:"cleanup"`
	// Routing decides where events go besides the default rules.
	Routing Routing `toml:"routing"`
	// Telegram is the Telegram adapter; enabled when Token is set.
	Telegram Telegram `toml:"telegram"`
	// Slack is the Slack adapter; enabled when BotToken is set.
	Slack Slack `toml:"slack"`
	// Matrix is the Matrix adapter; enabled when Homeserver is set.
	Matrix Matrix `toml:"matrix"`
	// Transcription turns voice messages into text; enabled when APIURL is set.
	Transcription Transcription `toml:"transcription"`
	// Fake is the in-memory test adapter.
	Fake Fake `toml:"fake"`
}

// HTTP configures the HTTP listener.
type HTTP struct {
	// Listen is the host:port to listen on. Default 127.0.0.1:8765. An
	// address reachable from other machines requires Token.
	Listen string `toml:"listen"`
	// Token is the bearer token HTTP clients (API, MCP, web page) must
	// present. Empty means no authentication, allowed on loopback only.
	Token string `toml:"token" secret:"true"`
}

// Log configures logging.
type Log struct {
	// Level is the least severe level logged: debug, info, warn or error.
	// Default info.
	Level string `toml:"level"`
	// Format is text (logfmt-like) or json. Default text.
	Format string `toml:"format"`
}

// Outbox configures the outbox shared by all adapters.
type Outbox struct {
	// FlushInterval is the pacing fallback: how often pending edits are
	// flushed when nothing else triggers a send, so a stalled agent still
	// shows its latest output. Default 1s.
	FlushInterval Duration `toml:"flush_interval"`
	// DrainTimeout is how long shutdown waits for pending operations to
	// reach the platforms before giving up on them. Default 5s.
	DrainTimeout Duration `toml:"drain_timeout"`
}

// Cleanup says, per lifetime of the cleanup ledger, whether its deletions
// are performed. A switched-off lifetime's messages stay on the platform.
type Cleanup struct {
	// NextNotice deletes notices (errors, "Transcribing…") when the next
	// notice arrives or output starts. Default true.
	NextNotice bool `toml:"next_notice"`
	// NextInput deletes a person's input and its transcription when the
	// next input arrives. Default true.
	NextInput bool `toml:"next_input"`
	// TurnComplete deletes progress and status messages when the turn
	// completes. Default true.
	TurnComplete bool `toml:"turn_complete"`
}

// Routing configures event routing.
type Routing struct {
	// ReflectInput copies what a person writes on one platform to the
	// session's other platforms, so everyone sees the whole conversation.
	// Default false: replies go to where the person wrote, input stays
	// where it was written.
	ReflectInput bool `toml:"reflect_input"`
}

// Telegram configures the Telegram adapter.
type Telegram struct {
	// Token is the bot token from @BotFather. Setting it enables the adapter.
	Token string `toml:"token" secret:"true"`
	// APIURL is the Bot API server, for self-hosted ones. Default
	// https://api.telegram.org.
	APIURL string `toml:"api_url" url:"true"`
	// ChatID is the forum supergroup whose topics hold the sessions.
	// Required with Token.
	ChatID int64 `toml:"chat_id"`
	// AllowedUsers are the Telegram user ids whose messages are accepted;
	// everyone else is ignored. Required with Token.
	AllowedUsers []int64 `toml:"allowed_users"`
	// Mode is how updates arrive: polling (default) or webhook.
	Mode string `toml:"mode"`
	// WebhookURL is the public URL Telegram posts updates to, routed to
	// parley's HTTP listener. Required in webhook mode.
	WebhookURL string `toml:"webhook_url" url:"true"`
	// WebhookSecret is sent by Telegram with every webhook request and
	// checked by parley: 1-256 characters of A-Z, a-z, 0-9, _ and -.
	WebhookSecret string `toml:"webhook_secret" secret:"true"`
	// NewFromGeneral makes a message in the group's General topic start a
	// session (in a new topic) as /new would. Default false: the General
	// topic only explains /new.
	NewFromGeneral bool `toml:"new_from_general"`
}

// Enabled reports whether the Telegram adapter is configured.
func (t Telegram) Enabled() bool { return t.Token != "" }

// Slack configures the Slack adapter, which connects in Socket Mode.
type Slack struct {
	// BotToken is the bot's xoxb- token. Setting it enables the adapter.
	BotToken string `toml:"bot_token" secret:"true"`
	// AppToken is the app-level xapp- token Socket Mode connects with.
	// Required with BotToken.
	AppToken string `toml:"app_token" secret:"true"`
	// APIURL is the Web API base URL, for tests; empty means Slack's.
	APIURL string `toml:"api_url" url:"true"`
	// Channel is the channel id whose threads hold the sessions.
	// Required with BotToken.
	Channel string `toml:"channel"`
	// AllowedUsers are the Slack user ids (U…) whose messages are
	// accepted; everyone else is ignored. Required with BotToken.
	AllowedUsers []string `toml:"allowed_users"`
}

// Enabled reports whether the Slack adapter is configured.
func (s Slack) Enabled() bool { return s.BotToken != "" }

// Matrix configures the Matrix adapter.
type Matrix struct {
	// Homeserver is the homeserver's base URL. Setting it enables the
	// adapter.
	Homeserver string `toml:"homeserver" url:"true"`
	// UserID is the bot's Matrix id, @name:server. Required with Homeserver.
	UserID string `toml:"user_id"`
	// AccessToken is the bot's access token. Required with Homeserver.
	AccessToken string `toml:"access_token" secret:"true"`
	// AllowedUsers are the Matrix ids whose messages are accepted;
	// everyone else is ignored. Required with Homeserver.
	AllowedUsers []string `toml:"allowed_users"`
}

// Enabled reports whether the Matrix adapter is configured.
func (m Matrix) Enabled() bool { return m.Homeserver != "" }

// Transcription configures speech-to-text for voice messages, through an
// OpenAI-compatible /audio/transcriptions endpoint.
type Transcription struct {
	// APIURL is the API's base URL. Setting it enables transcription.
	APIURL string `toml:"api_url" url:"true"`
	// APIKey is the bearer token for the API.
	APIKey string `toml:"api_key" secret:"true"`
	// Model is the model name sent with each request; empty lets the
	// server choose.
	Model string `toml:"model"`
}

// Enabled reports whether transcription is configured.
func (t Transcription) Enabled() bool { return t.APIURL != "" }

// Fake configures the in-memory test adapter.
type Fake struct {
	// Enabled adds the fake adapter, for tests and demos. Default false.
	Enabled bool `toml:"enabled"`
}

// Duration is a time.Duration written as a string like "2s" or "1m30s", in
// the file and in environment variables.
type Duration struct{ time.Duration }

// UnmarshalText parses a duration like 2s.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 2s", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration like 2s.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// Default returns the configuration used when there is no file and no
// variables: web page, API and MCP on 127.0.0.1:8765, no platform adapters.
// DataDir comes from the process environment; Load(path, env) uses env.
func Default() Config { return defaults(os.Environ()) }

func defaults(env []string) Config {
	return Config{
		DataDir: DefaultDataDir(env),
		HTTP:    HTTP{Listen: "127.0.0.1:8765"},
		Log:     Log{Level: "info", Format: "text"},
		Outbox: Outbox{
			FlushInterval: Duration{time.Second},
			DrainTimeout:  Duration{5 * time.Second},
		},
		Cleanup:  Cleanup{NextNotice: true, NextInput: true, TurnComplete: true},
		Telegram: Telegram{APIURL: "https://api.telegram.org", Mode: "polling"},
	}
}

// DefaultDataDir returns $XDG_DATA_HOME/parley, or ~/.local/share/parley
// when XDG_DATA_HOME is unset or relative (the XDG spec says to ignore a
// relative one), taking both from env; "" when HOME is needed and unset.
func DefaultDataDir(env []string) string {
	vars := envMap(env)
	if x := vars["XDG_DATA_HOME"]; filepath.IsAbs(x) {
		return filepath.Join(x, "parley")
	}
	if h := vars["HOME"]; h != "" {
		return filepath.Join(h, ".local", "share", "parley")
	}
	return ""
}

// Load reads the TOML file at path ("" for none), applies the PARLEY_*
// variables of env (as os.Environ returns it), and validates the result.
// On error the returned Config is as far as it got, and the error lists
// every problem found.
func Load(path string, env []string) (Config, error) {
	c := defaults(env)
	var errs []error
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		// Parsing alone first tells syntax errors, whose "last key" is
		// only where the parser was, from errors in a key's value.
		var raw map[string]any
		if _, err := toml.Decode(string(data), &raw); err != nil {
			return c, errors.Join(append([]error{fileError(path, err, false)}, applyEnv(&c, env)...)...)
		}
		md, err := toml.Decode(string(data), &c)
		if err != nil {
			// The file is half-read: validating it would mislead.
			return c, errors.Join(append([]error{fileError(path, err, true)}, applyEnv(&c, env)...)...)
		}
		errs = append(errs, unknownKeys(path, string(data), md)...)
	}
	errs = append(errs, applyEnv(&c, env)...)
	if rest, ok := strings.CutPrefix(c.DataDir, "~/"); ok {
		if home := envMap(env)["HOME"]; home != "" {
			c.DataDir = filepath.Join(home, rest)
		}
	}
	c.Log.Level = strings.ToLower(c.Log.Level)
	c.Log.Format = strings.ToLower(c.Log.Format)
	errs = append(errs, c.validate()...)
	return c, errors.Join(errs...)
}

var tomlLine = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// fileError turns a decoding error into one naming the file, the line and,
// for an error in a value, the key.
func fileError(path string, err error, inValue bool) error {
	var perr toml.ParseError
	if errors.As(err, &perr) {
		if inValue && perr.LastKey != "" {
			return fmt.Errorf("config: %s:%d: %s: %s", path, perr.Position.Line, perr.LastKey, perr.Message)
		}
		return fmt.Errorf("config: %s:%d: %s", path, perr.Position.Line, perr.Message)
	}
	if m := tomlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("config: %s:%s: %s: %s", path, m[1], m[2], m[3])
	}
	return fmt.Errorf("config: %s: %w", path, err)
}

// unknownKeys reports the file's keys that Config does not have, each once
// (not every key under an unknown table), with a suggestion.
func unknownKeys(path, data string, md toml.MetaData) []error {
	known := map[string]bool{}
	for _, f := range fields(&Config{}) {
		known[f.key] = true
		if section, _, ok := strings.Cut(f.key, "."); ok {
			known[section] = true
		}
	}
	seen := map[string]bool{}
	var errs []error
	for _, k := range md.Undecoded() {
		key := k.String()
		if len(k) > 1 && seen[toml.Key(k[:len(k)-1]).String()] {
			seen[key] = true
			continue
		}
		seen[key] = true
		where := path
		if line := keyLine(data, k); line > 0 {
			where = fmt.Sprintf("%s:%d", path, line)
		}
		what := "key " + key
		if md.Type(k...) == "Hash" {
			what = "table [" + key + "]"
		}
		errs = append(errs, fmt.Errorf("config: %s: unknown %s%s", where, what, suggest(key, known)))
	}
	return errs
}

// suggest offers the known key closest to an unknown one, or lists the keys
// of its section.
func suggest(key string, known map[string]bool) string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range known {
			if !yield(k) {
				return
			}
		}
	})
	best, bestDist := "", 3
	for _, k := range keys {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	section, _, ok := strings.Cut(key, ".")
	if !ok || !known[section] {
		return ""
	}
	var names []string
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k, section+"."); ok {
			names = append(names, name)
		}
	}
	return fmt.Sprintf(" (known keys in [%s]: %s)", section, strings.Join(names, ", "))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keyLine finds the line where key is set in a TOML text, for the simple
// shapes config files take (tables, key = value, dotted keys); 0 if not
// found.
func keyLine(data string, key toml.Key) int {
	want := strings.Join(key, ".")
	table := ""
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			name := strings.Trim(strings.SplitN(line, "]", 2)[0], "[ \t")
			table = unquoteKey(name)
			if table == want {
				return i + 1
			}
		case strings.Contains(line, "="):
			k := unquoteKey(strings.TrimSpace(strings.SplitN(line, "=", 2)[0]))
			if table != "" {
				k = table + "." + k
			}
			if k == want || strings.HasPrefix(want, k+".") {
				return i + 1
			}
		}
	}
	return 0
}

// unquoteKey turns a TOML dotted key as written into its parts joined by
// dots.
func unquoteKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		} else {
			p = strings.Trim(p, "'")
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}

// validate checks every rule and returns every violation.
func (c *Config) validate() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config: %s: %s (%s)", key, fmt.Sprintf(format, args...), fix(key)))
	}
	oneOf := func(key, v string, allowed ...string) {
		if !slices.Contains(allowed, v) {
			bad(key, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	isURL := func(key, v string) {
		if v == "" {
			return
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			bad(key, "%q is not an http or https URL", redactURL(v))
		}
	}

	if c.DataDir == "" {
		bad("data_dir", "empty, and there is no default because neither XDG_DATA_HOME nor HOME is set")
	}

	if host, port, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		bad("http.listen", "%q is not host:port, like 127.0.0.1:8765", c.HTTP.Listen)
	} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p > 65535 {
		bad("http.listen", "%q has no port number 0-65535", c.HTTP.Listen)
	} else if c.HTTP.Token == "" && !loopback(host) {
		errs = append(errs, fmt.Errorf("config: http.listen: %q accepts connections from other machines, so http.token is required (%s, or bind 127.0.0.1)",
			c.HTTP.Listen, fix("http.token")))
	}

	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "text", "json")

	if c.Outbox.FlushInterval.Duration <= 0 {
		bad("outbox.flush_interval", "%s is not positive; use a duration like 1s", c.Outbox.FlushInterval)
	}
	if c.Outbox.DrainTimeout.Duration < 0 {
		bad("outbox.drain_timeout", "%s is negative; use a duration like 5s, or 0s not to wait", c.Outbox.DrainTimeout)
	}

	t := c.Telegram
	isURL("telegram.api_url", t.APIURL)
	if t.APIURL == "" {
		bad("telegram.api_url", "empty; the default is https://api.telegram.org")
	}
	oneOf("telegram.mode", t.Mode, "polling", "webhook")
	isURL("telegram.webhook_url", t.WebhookURL)
	if t.WebhookSecret != "" && !webhookSecret.MatchString(t.WebhookSecret) {
		bad("telegram.webhook_secret", "must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
	}
	if t.Enabled() {
		if t.ChatID == 0 {
			bad("telegram.chat_id", "required with telegram.token: the id of the forum supergroup whose topics hold the sessions")
		}
		if len(t.AllowedUsers) == 0 {
			bad("telegram.allowed_users", "empty, so the bot would ignore everyone; list the Telegram user ids allowed to use it")
		}
		for _, id := range t.AllowedUsers {
			if id <= 0 {
				bad("telegram.allowed_users", "%d is not a user id (user ids are positive)", id)
			}
		}
		if t.Mode == "webhook" && t.WebhookURL == "" {
			bad("telegram.webhook_url", "required when telegram.mode is webhook")
		}
	} else if t.ChatID != 0 || len(t.AllowedUsers) > 0 || t.WebhookURL != "" || t.WebhookSecret != "" || t.Mode != "polling" {
		bad("telegram.token", "empty, but other [telegram] keys are set; set the token to enable Telegram, or remove them")
	}

	s := c.Slack
	isURL("slack.api_url", s.APIURL)
	if s.Enabled() {
		if s.AppToken == "" {
			bad("slack.app_token", "required with slack.bot_token: the app-level xapp- token Socket Mode connects with")
		}
		if s.Channel == "" {
			bad("slack.channel", "required with slack.bot_token: the id of the channel whose threads hold the sessions")
		}
		if len(s.AllowedUsers) == 0 {
			bad("slack.allowed_users", "empty, so the bot would ignore everyone; list the Slack user ids (U…) allowed to use it")
		}
	} else if s.AppToken != "" || s.APIURL != "" || s.Channel != "" || len(s.AllowedUsers) > 0 {
		bad("slack.bot_token", "empty, but other [slack] keys are set; set the token to enable Slack, or remove them")
	}

	m := c.Matrix
	isURL("matrix.homeserver", m.Homeserver)
	if m.Enabled() {
		if m.UserID == "" {
			bad("matrix.user_id", "required with matrix.homeserver: the bot's id, like @parley:example.org")
		} else if !matrixID(m.UserID) {
			bad("matrix.user_id", "%q is not a Matrix id like @parley:example.org", m.UserID)
		}
		if m.AccessToken == "" {
			bad("matrix.access_token", "required with matrix.homeserver")
		}
		if len(m.AllowedUsers) == 0 {
			bad("matrix.allowed_users", "empty, so the bot would ignore everyone; list the Matrix ids allowed to use it")
		}
		for _, id := range m.AllowedUsers {
			if !matrixID(id) {
				bad("matrix.allowed_users", "%q is not a Matrix id like @alice:example.org", id)
			}
		}
	} else if m.UserID != "" || m.AccessToken != "" || len(m.AllowedUsers) > 0 {
		bad("matrix.homeserver", "empty, but other [matrix] keys are set; set it to enable Matrix, or remove them")
	}

	tr := c.Transcription
	isURL("transcription.api_url", tr.APIURL)
	if !tr.Enabled() && (tr.APIKey != "" || tr.Model != "") {
		bad("transcription.api_url", "empty, but other [transcription] keys are set; set it to enable transcription, or remove them")
	}
	return errs
}

var webhookSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// matrixID reports whether id looks like @localpart:server.
func matrixID(id string) bool {
	local, server, ok := strings.Cut(strings.TrimPrefix(id, "@"), ":")
	return strings.HasPrefix(id, "@") && ok && local != "" && server != ""
}

// loopback reports whether a listen host accepts connections from this
// machine only. An empty host or an unspecified address listens on every
// interface.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// fix says where to set key: "set [log] format or PARLEY_LOG_FORMAT".
func fix(key string) string {
	section, name, ok := strings.Cut(key, ".")
	if !ok {
		return fmt.Sprintf("set %s or %s", key, envName(strings.Split(key, ".")))
	}
	return fmt.Sprintf("set [%s] %s or %s", section, name, envName(strings.Split(key, ".")))
}

// Redacted returns a copy of c with every non-empty secret replaced by
// "***" and passwords in URLs masked (as url.URL.Redacted does), fit for
// logging.
func (c Config) Redacted() Config {
	// Copy the slices too, so the copy shares nothing mutable with c.
	c.Telegram.AllowedUsers = slices.Clone(c.Telegram.AllowedUsers)
	c.Slack.AllowedUsers = slices.Clone(c.Slack.AllowedUsers)
	c.Matrix.AllowedUsers = slices.Clone(c.Matrix.AllowedUsers)
	for _, f := range fields(&c) {
		if f.v.Kind() != reflect.String {
			continue
		}
		switch s := f.v.String(); {
		case f.secret && s != "":
			f.v.SetString("***")
		case f.url:
			f.v.SetString(redactURL(s))
		}
	}
	return c
}

// redactURL masks the password of a URL's user info, and all of the user
// info of something that does not even parse as a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err == nil {
		return u.Redacted()
	}
	if at := strings.LastIndex(s, "@"); at >= 0 {
		start := 0
		if i := strings.Index(s, "://"); i >= 0 && i < at {
			start = i + 3
		}
		return s[:start] + "***" + s[at:]
	}
	return s
}

// String returns the configuration as TOML, with secrets redacted.
func (c Config) String() string {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(c.Redacted()); err != nil {
		return "config: " + err.Error()
	}
	return b.String()
}

// GoString is String, so that %#v does not print secrets either.
func (c Config) GoString() string { return c.String() }

// LogValue logs the configuration as groups per section, with secrets
// redacted.
func (c Config) LogValue() slog.Value {
	r := c.Redacted()
	var top []slog.Attr
	groups := map[string][]slog.Attr{}
	var order []string
	for _, f := range fields(&r) {
		section, name, ok := strings.Cut(f.key, ".")
		v := slog.AnyValue(f.v.Interface())
		if d, isDur := f.v.Interface().(Duration); isDur {
			v = slog.StringValue(d.String())
		}
		if !ok {
			top = append(top, slog.Attr{Key: f.key, Value: v})
			continue
		}
		if _, seen := groups[section]; !seen {
			order = append(order, section)
		}
		groups[section] = append(groups[section], slog.Attr{Key: name, Value: v})
	}
	for _, s := range order {
		top = append(top, slog.Attr{Key: s, Value: slog.GroupValue(groups[s]...)})
	}
	return slog.GroupValue(top...)
}

// SlogLevel returns Level as a slog.Level; info if Level is not valid.
func (l Log) SlogLevel() slog.Level {
	var v slog.Level
	if err := v.UnmarshalText([]byte(cmp.Or(l.Level, "info"))); err != nil {
		return slog.LevelInfo
	}
	return v
}
