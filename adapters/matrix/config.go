package matrix

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/core"
)

// Config is the [matrix] section of parley's configuration: what a person
// writes in the file (each key also as PARLEY_MATRIX_<KEY>), as opposed to
// Options, which also carries what the daemon provides (the store, the
// pacer, the file directory, a logger).
type Config struct {
	// Homeserver is the client-server API's base URL
	// (https://matrix.example.org). Setting it enables the adapter.
	Homeserver string `toml:"homeserver" url:"true"`
	// UserID is the bot's full Matrix id (@parley:example.org).
	UserID string `toml:"user_id"`
	// AccessToken is the bot's access token. Either it or Password.
	AccessToken string `toml:"access_token" secret:"true"`
	// Password logs the bot in once; the token and device id the
	// homeserver gives are kept in parley's store and reused.
	Password string `toml:"password" secret:"true"`
	// AllowedUsers are the full Matrix ids (@alice:example.org) whose input
	// is accepted and whose invites the bot follows; everyone else is
	// ignored.
	AllowedUsers []string `toml:"allowed_users"`
	// Space, optional, is the room id (!…) or alias (#…) of a space the
	// rooms the bot creates for sessions are added to.
	Space string `toml:"space"`
	// MessagesPerMinute and MessageBurst are the account's message budget
	// on the homeserver that parley starts from, across all its rooms
	// (messages, edits, room names and redactions all count). Defaults:
	// Synapse's rc_message, 12 a minute (0.2 a second) with bursts of 10.
	// parley then learns the homeserver's: the budget grows while the
	// homeserver never answers M_LIMIT_EXCEEDED (up to 10 events a second)
	// and drops to what it accepted when it does. Set them to the
	// homeserver's limit for the bot's account to start right.
	MessagesPerMinute int64 `toml:"messages_per_minute"`
	MessageBurst      int64 `toml:"message_burst"`
}

// DefaultConfig is the section when nothing is said: no homeserver, so the
// adapter is off.
func DefaultConfig() Config { return Config{MessagesPerMinute: 12, MessageBurst: 10} }

// Enabled reports whether the section turns the adapter on: a homeserver
// is set.
func (c Config) Enabled() bool { return c.Homeserver != "" }

// Allowed returns the Matrix ids admitted to the adapter's origin, as the
// adapter writes core.Actor.ID. Never nil: an empty list admits nobody.
func (c Config) Allowed() []string {
	ids := make([]string, 0, len(c.AllowedUsers))
	for _, u := range c.AllowedUsers {
		ids = append(ids, strings.TrimSpace(u))
	}
	return ids
}

// Options returns the adapter options the section sets. The caller adds
// what the daemon provides (Platform does): Cursors, Authorizer, Files,
// Pacer, Transcriber, Logger.
func (c Config) Options() Options {
	return Options{Homeserver: c.Homeserver, UserID: id.UserID(strings.TrimSpace(c.UserID)), AccessToken: c.AccessToken,
		Password: c.Password, Allowed: c.Allowed(), Space: strings.TrimSpace(c.Space), MessageRate: c.rate()}
}

// rate is the message budget as a sliding window within the homeserver's
// token bucket: half the burst, over the time the rate takes to refill
// it. Any window of N events per N/rate with N at most the burst never
// exceeds the bucket; a smaller N shortens the pause a busy account makes
// once its window is spent (at 0.2 a second, 20 s rather than 40 s), at the
// cost of shorter bursts.
func (c Config) rate() core.Rate {
	if c.MessagesPerMinute <= 0 || c.MessageBurst <= 0 {
		return core.Rate{}
	}
	n := max(1, c.MessageBurst/2)
	return core.Rate{N: int(n), Per: time.Duration(n) * time.Minute / time.Duration(c.MessagesPerMinute)}
}

// Validate reports each problem of the section through report, with the
// key inside the section and what is wrong and how to fix it. A problem
// never quotes a secret.
func (c Config) Validate(report func(key, problem string)) {
	if c.MessagesPerMinute <= 0 {
		report("messages_per_minute", fmt.Sprintf("%d must be positive: the events a minute the homeserver allows the bot (Synapse's default is 12)", c.MessagesPerMinute))
	}
	if c.MessageBurst <= 0 {
		report("message_burst", fmt.Sprintf("%d must be positive: the burst the homeserver allows the bot (Synapse's default is 10)", c.MessageBurst))
	}
	if !c.Enabled() {
		if c.UserID != "" || c.AccessToken != "" || c.Password != "" || len(c.AllowedUsers) > 0 || c.Space != "" {
			report("homeserver", "empty, but other [matrix] keys are set; set the homeserver's URL (https://matrix.example.org) to enable Matrix, or remove them")
		}
		return
	}
	if u, err := url.Parse(c.Homeserver); err == nil && (u.RawQuery != "" || u.Fragment != "") {
		report("homeserver", fmt.Sprintf("%q has a query or fragment; write the homeserver's base URL, like https://matrix.example.org", c.Homeserver))
	}
	switch uid := strings.TrimSpace(c.UserID); {
	case uid == "":
		report("user_id", "required with matrix.homeserver: the bot's full Matrix id, like @parley:example.org")
	case !validUserID(uid):
		report("user_id", fmt.Sprintf("%q is not a full Matrix id: write @localpart:server, like @parley:example.org", uid))
	}
	switch {
	case c.AccessToken == "" && c.Password == "":
		report("access_token", "required with matrix.homeserver: the bot's access token, or set matrix.password instead to log in once (the token is then kept in parley's store)")
	case c.AccessToken != "" && c.Password != "":
		report("password", "set together with matrix.access_token; keep only one of them (the token is used as it is, the password logs in once)")
	}
	if len(c.AllowedUsers) == 0 {
		report("allowed_users", "empty, so the bot would ignore everyone and decline every invite; list the full Matrix ids (@alice:example.org) allowed to use it")
	}
	for _, u := range c.AllowedUsers {
		if !validUserID(strings.TrimSpace(u)) {
			report("allowed_users", fmt.Sprintf("%q is not a full Matrix id: write @localpart:server, like @alice:example.org", u))
		}
	}
	if s := strings.TrimSpace(c.Space); s != "" && !strings.HasPrefix(s, "!") && !strings.HasPrefix(s, "#") {
		report("space", fmt.Sprintf("%q is neither a room id (!…) nor an alias (#…); write the space's id (its settings → Advanced) or alias", s))
	}
}

// validUserID reports whether s is a full Matrix user id, @localpart:server.
func validUserID(s string) bool {
	local, server, err := id.UserID(s).Parse()
	return err == nil && local != "" && server != ""
}
