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
// A platform's section is defined by the platform's package
// (telegram.Config) and is not a field of Config: Load and Example are
// given the platforms this build has (Platforms.Present, from cmd/parley's
// table) and hold one section of each in Config.Platforms, made by the
// platform with its defaults. Its keys, variables, redaction and URL checks
// follow from its tags like any other section's, its own rules from its
// Validate method (Section), and its descriptions in the example from the
// platform (Doc, KeyDocs); so adding a platform does not touch this
// package. A platform parley knows of but this build lacks
// (Platforms.Absent) is refused by name, section or variables alike,
// rather than reported as unknown keys or silently ignored.
//
// Secrets (tokens, API keys, webhook secrets) never appear in errors, and
// String, Redacted and LogValue replace them with "***" for logging; in a
// secret list of NAME=value settings ([agent] env) only the values are
// replaced, so a log still says what is set.
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
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/store/files"
)

// Config is parley's whole configuration. The zero Config is not valid: start
// from Default or Load.
type Config struct {
	// DataDir is where parley keeps its database and received files.
	// Default: $XDG_DATA_HOME/parley, else ~/.local/share/parley. A leading
	// "~/" is expanded to $HOME.
	DataDir string `toml:"data_dir"`
	// Retention is how long parley keeps what only serves to recognise a
	// repeated delivery (dedup keys, session reservations) or to finish a
	// deletion (cleanup-ledger rows); older ones are pruned hourly.
	// Messages, sessions and undelivered messages are never pruned.
	// Default 30d. At least 24h: platforms redeliver for up to a day.
	Retention Duration `toml:"retention"`
	// FilesMaxMB bounds, in MiB, the copies of files parley keeps in
	// data_dir/blobs: each file an agent sends, or a person sends an
	// agent, is copied there as it arrives and delivered and read from
	// that copy, which goes once it is delivered and no message within
	// the retention refers to it. A file that would pass the bound is
	// refused with an error naming this key. Default 2048.
	FilesMaxMB int64 `toml:"files_max_mb"`
	// Store says where parley keeps its state: bbolt in data_dir, or a
	// PostgreSQL database.
	Store Store `toml:"store"`
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
	// Access admits people beyond the platforms' allow-lists.
	Access Access `toml:"access"`
	// MCP configures what the chat server agents use tells people.
	MCP MCP `toml:"mcp"`
	// Agent is the agent parley runs for each session itself, the
	// default of sessions that name none ([agents.NAME] name others);
	// none by default, agents connecting on their own.
	Agent Agent `toml:"agent"`
	// Agents are the named agents ([agents.NAME]) parley runs beside
	// Agent, chosen per session (agent.go). Their keys come here, after
	// [agent]'s, by name.
	Agents map[string]*Agent `toml:"-"`
	// Platforms are the sections of the chat platforms this build has
	// ([telegram], [slack], …), in the order of the Platforms Load was
	// given, each defined, defaulted and validated by its platform's
	// package. Their keys come here, between [agent] and [transcription],
	// in the file's order of sections, the example's and the log's.
	Platforms []PlatformSection `toml:"-"`
	// Transcription turns voice messages into text; enabled when api_url is
	// set.
	Transcription Transcription `toml:"transcription"`
}

// HTTP configures the HTTP listener.
type HTTP struct {
	// Listen is the host:port to listen on. Default 127.0.0.1:8765. An
	// address reachable from other machines requires Token.
	Listen string `toml:"listen"`
	// Token is the bearer token HTTP clients (API, MCP, web page) must
	// present. Empty means no authentication, allowed on loopback only;
	// beyond loopback it must be at least 16 characters (make one with
	// `openssl rand -hex 32`).
	Token string `toml:"token" secret:"true"`
	// AllowedHosts are the host names (or addresses) besides localhost and
	// loopback addresses that parley answers to, for a reverse proxy or a
	// name on the network: parley.example.org. A request carrying any
	// other Host header is refused, which keeps web pages from reaching
	// parley by DNS rebinding. Platform webhooks are exempt (they check
	// the platform's secret). Default none.
	AllowedHosts []string `toml:"allowed_hosts"`
}

// Store says which database parley keeps its state in.
type Store struct {
	// URL is a PostgreSQL database parley keeps its state in instead of
	// the bbolt file in data_dir (which still holds received and
	// generated files): postgres://USER:PASSWORD@HOST:5432/DB, PostgreSQL
	// 15 or newer; parley creates and migrates its tables. Never logged,
	// as it may hold a password. `parley migrate --from DATA_DIR` copies
	// a data directory's state into it. Default "": the bbolt file.
	URL string `toml:"url" secret:"true"`
	// BackupDir is a directory for backups of the bbolt database, as an
	// absolute path (a leading "~/" is expanded to $HOME): parley serve
	// takes one there when the newest is a day old (at start and then
	// hourly checks), `parley backup` without a FILE writes one there, and
	// `parley doctor` says when the newest is older than a day. Not used
	// with url (back PostgreSQL up with pg_dump). Default "": no
	// automatic backups.
	BackupDir string `toml:"backup_dir"`
	// BackupKeep is how many backups backup_dir keeps: once parley serve
	// took one, the oldest beyond this many are deleted (only files
	// named parley-YYYYMMDDTHHMMSSZ.db, as parley writes them). Default 7.
	BackupKeep int64 `toml:"backup_keep"`
}

// Validate implements Section. The URL is never quoted: it may hold a
// password.
func (s Store) Validate(report func(key, problem string)) {
	s.validateBackups(report)
	if s.URL == "" {
		return
	}
	u, err := url.Parse(s.URL)
	switch {
	case err != nil:
		report("url", "not a URL; write it like postgres://parley:PASSWORD@127.0.0.1:5432/parley, or remove it to keep the bbolt file in data_dir")
	case u.Scheme != "postgres" && u.Scheme != "postgresql":
		report("url", fmt.Sprintf("its scheme %q is not postgres or postgresql: parley stores its state in PostgreSQL; write it like postgres://parley:PASSWORD@127.0.0.1:5432/parley, or remove it to keep the bbolt file in data_dir", u.Scheme))
	case u.Host == "" && u.Query().Get("host") == "":
		report("url", "names no host; write it like postgres://parley:PASSWORD@127.0.0.1:5432/parley")
	}
}

// minToken is the shortest bearer token accepted beyond loopback.
const minToken = 16

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

// Access configures how people are admitted beyond the platforms'
// allowed_users lists.
type Access struct {
	// Pairing gives a person not on a platform's allow-list who writes to
	// the bot in a private chat a one-time code; `parley pairing approve
	// CODE` admits them. Default false.
	Pairing bool `toml:"pairing"`
}

// MCP configures the MCP chat server's dealings with people.
type MCP struct {
	// NoAgentNotice is the short notice a person on a chat platform gets
	// who writes to a session no agent listens to (subscribed to its
	// inbox or to all sessions'); the next notice or the agent's output
	// deletes it. Empty sends none. Default: a sentence saying the message
	// is kept and will be read when an agent connects.
	NoAgentNotice string `toml:"no_agent_notice"`
	// SendDirs are the directories agents may send files from with
	// chat.assistant.post, as absolute paths; a file's symlinks are
	// resolved before the check. Never sent, whatever this says: /proc,
	// /sys, /dev, the data directory and the config file. Default: the
	// directory parley was started in (unless it is "/") and the system
	// temporary directory; [] allows none.
	SendDirs []string `toml:"send_dirs"`
	// MaxSessions bounds the MCP sessions (and 2026-07-28 listen streams)
	// open at once; at the bound the session idle longest is ended to make
	// room, and only when none is idle is an agent refused, with an error
	// naming this key. A session ends when its client sends DELETE, stops
	// reading its stream, or makes no request for 60 s with no stream
	// open. Default 256.
	MaxSessions int64 `toml:"max_sessions"`
}

// maxNotice bounds a configured notice, well within every platform's
// message length.
const maxNotice = 1000

// Validate implements Section.
func (m MCP) Validate(report func(key, problem string)) {
	n := m.NoAgentNotice
	switch {
	case n != "" && strings.TrimSpace(n) == "":
		report("no_agent_notice", `only white space; write the notice, or set it to "" to send none`)
	case len(n) > maxNotice:
		report("no_agent_notice", fmt.Sprintf("%d bytes, more than %d; shorten it", len(n), maxNotice))
	case !utf8.ValidString(n):
		report("no_agent_notice", "not valid UTF-8")
	}
	if m.MaxSessions < 1 {
		report("max_sessions", fmt.Sprintf("%d; at least 1 (default %d)", m.MaxSessions, mcp.DefaultMaxSessions))
	}
	for _, d := range m.SendDirs {
		if !filepath.IsAbs(d) {
			report("send_dirs", fmt.Sprintf("%q is not an absolute path; write it from the root, like /home/me/work", d))
		}
	}
}

// Routing configures event routing.
type Routing struct {
	// ReflectInput copies what a person writes on one platform to the
	// session's other platforms, so everyone sees the whole conversation.
	// Default false: replies go to where the person wrote, input stays
	// where it was written.
	ReflectInput bool `toml:"reflect_input"`
}

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

// Validate implements Section.
func (t Transcription) Validate(report func(key, problem string)) {
	if !t.Enabled() && (t.APIKey != "" || t.Model != "") {
		report("api_url", "empty, but other [transcription] keys are set; set it to enable transcription, or remove them")
	}
}

// PlatformSection is one platform's section of a Config.
type PlatformSection struct {
	// Name is the platform's name, the section's: "telegram".
	Name string
	// Section is the section, a pointer to the platform's section type
	// (*telegram.Config). Copies of a Config share it.
	Section platform.Section
}

// newSections makes a section of each platform, with its defaults.
func newSections(present []platform.Platform) []PlatformSection {
	out := make([]PlatformSection, 0, len(present))
	for _, p := range present {
		out = append(out, PlatformSection{Name: string(p.Name), Section: p.Section()})
	}
	return out
}

// PlatformSection returns c's section of the platform name ([telegram]),
// or false when c has none: a Config made by Default, or a platform this
// build does not configure, such as a test's.
func (c *Config) PlatformSection(name string) (platform.Section, bool) {
	for _, ps := range c.Platforms {
		if ps.Name == name {
			return ps.Section, true
		}
	}
	return nil, false
}

// SectionFor returns c's section of p, first adding one with p's defaults
// when c has none (a Config made by Default): what a program that builds
// its configuration in code sets p's keys in.
func (c *Config) SectionFor(p platform.Platform) platform.Section {
	if s, ok := c.PlatformSection(string(p.Name)); ok {
		return s
	}
	s := p.Section()
	c.Platforms = append(slices.Clip(c.Platforms), PlatformSection{Name: string(p.Name), Section: s})
	return s
}

// Section is a section of the configuration that checks its own keys,
// beyond what Load checks of every key (that its value has the key's type,
// and that a key tagged url is an http or https URL). Every platform's
// section implements it, in the platform's own package (telegram.Config),
// so that the rules of a platform's keys live with the platform; Load calls
// Validate on each section of Config that implements it.
type Section interface {
	// Validate reports each problem through report: the key inside the
	// section ("chat_id") and what is wrong and how to fix it ("required
	// with telegram.token: the id of …"). Load prefixes the section and
	// appends where the key is set. A problem never quotes a secret.
	Validate(report func(key, problem string))
}

// Platforms tells Load which platforms parley knows of. The configuration
// has a section for each platform this build has; a section (or variable)
// of a platform this build lacks is refused by the platform's name before
// any of its keys, instead of as an unknown key. cmd/parley derives it
// from its table of platforms.
type Platforms struct {
	// Present are the platforms this build has, with their sections, and
	// named in that error.
	Present []platform.Platform
	// Absent are the platforms parley knows of that this build lacks:
	// [matrix], PARLEY_MATRIX_* are refused with their name.
	Absent []string
}

// Duration is a time.Duration written as a string like "2s" or "1m30s", in
// the file and in environment variables; a whole number of days may be
// written like "30d", as retentions are.
type Duration struct{ time.Duration }

// day is the unit of durations written like 30d.
const day = 24 * time.Hour

// UnmarshalText parses a duration like 2s, or a number of days like 30d.
func (d *Duration) UnmarshalText(b []byte) error {
	if days, ok := strings.CutSuffix(string(b), "d"); ok {
		if n, err := strconv.ParseUint(days, 10, 16); err == nil {
			d.Duration = time.Duration(n) * day
			return nil
		}
	}
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 2s", b)
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration like 2s, or like 30d when it is a whole
// number of days.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// String is the duration as MarshalText writes it.
func (d Duration) String() string {
	if d.Duration > 0 && d.Duration%day == 0 {
		return strconv.FormatInt(int64(d.Duration/day), 10) + "d"
	}
	return d.Duration.String()
}

// Default returns the configuration used when there is no file and no
// variables: web page, API and MCP on 127.0.0.1:8765, no platform adapters.
// It holds no platform sections (SectionFor adds one). DataDir comes from
// the process environment; Load(path, env) uses env.
func Default() Config { return defaults(os.Environ(), nil) }

// defaults is the configuration with no file and no variables, with a
// section of each of the present platforms.
func defaults(env []string, present []platform.Platform) Config {
	return Config{
		DataDir:    DefaultDataDir(env),
		Retention:  Duration{30 * day},
		FilesMaxMB: files.DefaultMaxTotal >> 20,
		Store:      Store{BackupKeep: DefaultBackupKeep},
		HTTP:       HTTP{Listen: "127.0.0.1:8765"},
		Log:        Log{Level: "info", Format: "text"},
		Outbox: Outbox{
			FlushInterval: Duration{time.Second},
			DrainTimeout:  Duration{5 * time.Second},
		},
		Cleanup:   Cleanup{NextNotice: true, NextInput: true, TurnComplete: true},
		MCP:       MCP{NoAgentNotice: mcp.DefaultNoAgentNotice, SendDirs: mcp.DefaultSendDirs(), MaxSessions: int64(mcp.DefaultMaxSessions)},
		Agent:     defaultAgent(),
		Platforms: newSections(present),
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
// Sections and variables of platforms.Absent are refused by name first.
// On error the returned Config is as far as it got, and the error lists
// every problem found.
func Load(path string, env []string, platforms Platforms) (Config, error) {
	c := defaults(env, platforms.Present)
	errs := absentEnv(env, platforms)
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return c, fmt.Errorf("config: %w", err)
		}
		// Parsing alone first tells syntax errors, whose "last key" is
		// only where the parser was, from errors in a key's value.
		var raw map[string]any
		if _, err := toml.Decode(string(data), &raw); err != nil {
			return c, errors.Join(append(append(errs, fileError(path, err, false)), applyEnv(&c, env)...)...)
		}
		errs = append(absentSections(path, string(data), raw, platforms), errs...)
		md, err := c.decode(string(data))
		// A value of the wrong type or form ends decoding at that key.
		// To report every problem at once, the key is taken out and the
		// rest decoded again, until all that is left decodes.
		for err != nil {
			key, msg, ok := failedKey(err)
			if !ok || !deleteKey(raw, key) {
				// The file is half-read: validating it would mislead.
				return c, errors.Join(append(append(errs, fileError(path, err, true)), applyEnv(&c, env)...)...)
			}
			where := path
			if line := keyLine(string(data), toml.Key(strings.Split(key, "."))); line > 0 {
				where = fmt.Sprintf("%s:%d", path, line)
			}
			errs = append(errs, fmt.Errorf("config: %s: %s: %s", where, key, msg))
			var rest strings.Builder
			if err := toml.NewEncoder(&rest).Encode(raw); err != nil {
				return c, errors.Join(append(errs, applyEnv(&c, env)...)...)
			}
			c = defaults(env, platforms.Present)
			md, err = c.decode(rest.String())
		}
		errs = append(errs, unknownKeys(path, string(data), md, &c, platforms.Absent)...)
	}
	agentsFromEnv(&c, env)
	errs = append(errs, applyEnv(&c, env)...)
	paths := []*string{&c.DataDir, &c.Agent.Workdir, &c.Store.BackupDir}
	for _, a := range c.Agents {
		paths = append(paths, &a.Workdir)
	}
	for _, p := range paths {
		if rest, ok := strings.CutPrefix(*p, "~/"); ok {
			if home := envMap(env)["HOME"]; home != "" {
				*p = filepath.Join(home, rest)
			}
		}
	}
	c.resolveAgents()
	c.Log.Level = strings.ToLower(c.Log.Level)
	c.Log.Format = strings.ToLower(c.Log.Format)
	errs = append(errs, c.validate()...)
	return c, errors.Join(errs...)
}

// failedKey returns the key whose value a decoding error is about, and
// what is wrong with it.
func failedKey(err error) (key, msg string, ok bool) {
	var perr toml.ParseError
	if errors.As(err, &perr) && perr.LastKey != "" {
		return perr.LastKey, perr.Message, true
	}
	if m := tomlLine.FindStringSubmatch(err.Error()); m != nil && m[2] != "" {
		return m[2], m[3], true
	}
	return "", "", false
}

// deleteKey removes a dotted key from a decoded TOML document, reporting
// whether it was there.
func deleteKey(doc map[string]any, key string) bool {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := doc[p].(map[string]any)
		if !ok {
			return false
		}
		doc = next
	}
	last := parts[len(parts)-1]
	if _, ok := doc[last]; !ok {
		return false
	}
	delete(doc, last)
	return true
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

	if c.Retention.Duration < day {
		bad("retention", "%s is shorter than a day: platforms redeliver updates for up to 24 hours (Telegram), and a redelivery is recognised only while its key is kept; use 30d, or at least 24h", c.Retention)
	}

	if c.FilesMaxMB < 1 {
		bad("files_max_mb", "%d; at least 1 (default %d)", c.FilesMaxMB, files.DefaultMaxTotal>>20)
	}

	if host, port, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		bad("http.listen", "%q is not host:port, like 127.0.0.1:8765", c.HTTP.Listen)
	} else if p, err := strconv.ParseUint(port, 10, 16); err != nil || p > 65535 {
		bad("http.listen", "%q has no port number 0-65535", c.HTTP.Listen)
	} else if c.HTTP.Token == "" && !loopback(host) {
		errs = append(errs, fmt.Errorf("config: http.listen: %q accepts connections from other machines, so http.token is required (%s to a secret such as the output of `openssl rand -hex 32`, or bind 127.0.0.1)",
			c.HTTP.Listen, fix("http.token")))
	} else if !loopback(host) && len(strings.TrimSpace(c.HTTP.Token)) < minToken {
		bad("http.token", "shorter than %d characters, too easy to guess for an address other machines reach (%s); make one with `openssl rand -hex 32`", minToken, c.HTTP.Listen)
	}
	if c.HTTP.Token != "" && strings.TrimSpace(c.HTTP.Token) != c.HTTP.Token {
		bad("http.token", "begins or ends with white space, which no client's Authorization header keeps; remove it (make a token with `openssl rand -hex 32`)")
	}
	for i, h := range c.HTTP.AllowedHosts {
		if !hostEntry(h) {
			bad("http.allowed_hosts", "item %d, %q, is not a host name or address; write the name alone, like parley.example.org, without scheme, port or path", i+1, h)
		}
	}

	oneOf("log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf("log.format", c.Log.Format, "text", "json")

	if c.Outbox.FlushInterval.Duration <= 0 {
		bad("outbox.flush_interval", "%s is not positive; use a duration like 1s", c.Outbox.FlushInterval)
	}
	if c.Outbox.DrainTimeout.Duration < 0 {
		bad("outbox.drain_timeout", "%s is negative; use a duration like 5s, or 0s not to wait", c.Outbox.DrainTimeout)
	}

	c.validateAgents(bad)

	// Every section's URL keys, then its own rules, section by section so
	// that a section's problems read together.
	for _, sec := range sections(c) {
		for _, f := range fields(c) {
			if f.url && strings.HasPrefix(f.key, sec.name+".") {
				isURL(f.key, f.v.String())
			}
		}
		if v, ok := sec.v.Interface().(Section); ok {
			v.Validate(func(key, problem string) { bad(sec.name+"."+key, "%s", problem) })
		}
	}
	return errs
}

// hostName matches a DNS name (parley.example.org, localhost) as people
// write one in allowed_hosts.
var hostName = regexp.MustCompile(`^(?i)[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*\.?$`)

// hostEntry reports whether s is a host name or an IP address (IPv6 with
// or without brackets), with no scheme, port or path.
func hostEntry(s string) bool {
	if _, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")); err == nil {
		return true
	}
	return len(s) <= 253 && hostName.MatchString(s)
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

// fix says where to set key: "set [log] format or PARLEY_LOG_FORMAT",
// "set [agents.codex] kind or PARLEY_AGENTS_CODEX_KIND".
func fix(key string) string {
	dot := strings.LastIndex(key, ".")
	if dot < 0 {
		return fmt.Sprintf("set %s or %s", key, envName(strings.Split(key, ".")))
	}
	return fmt.Sprintf("set [%s] %s or %s", key[:dot], key[dot+1:], envName(strings.Split(key, ".")))
}

// Redacted returns a copy of c with every non-empty secret replaced by
// "***" and passwords in URLs masked (as url.URL.Redacted does), fit for
// logging.
func (c Config) Redacted() Config {
	// The copy shares the platforms' sections and the named agents with
	// c: copy them too.
	c.Agents = cloneAgents(c.Agents)
	c.Platforms = slices.Clone(c.Platforms)
	for i, ps := range c.Platforms {
		v := reflect.New(reflect.TypeOf(ps.Section).Elem())
		v.Elem().Set(reflect.ValueOf(ps.Section).Elem())
		c.Platforms[i].Section = v.Interface().(platform.Section)
	}
	for _, f := range fields(&c) {
		if f.v.Kind() == reflect.Slice && !f.v.IsNil() {
			// Copy the lists, so the copy shares nothing mutable with c.
			f.v.Set(reflect.AppendSlice(reflect.MakeSlice(f.v.Type(), 0, f.v.Len()), f.v))
			if f.secret && f.v.Type().Elem().Kind() == reflect.String {
				for i := range f.v.Len() {
					f.v.Index(i).SetString(redactSetting(f.v.Index(i).String()))
				}
			}
		}
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

// redactSetting masks the value of a NAME=value setting, keeping the
// name, which says what is set without saying what to.
func redactSetting(s string) string {
	if name, _, ok := strings.Cut(s, "="); ok {
		return name + "=***"
	}
	return "***"
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
	r := c.Redacted()
	view, _ := r.tomlView()
	if err := toml.NewEncoder(&b).Encode(view.Interface()); err != nil {
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
