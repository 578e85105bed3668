package telegram

import (
	"fmt"
	"regexp"
	"strconv"
)

// Config is the [telegram] section of parley's configuration: what a person
// writes in the file, as opposed to Options, which also carries what the
// daemon provides (the cursor store, the file directory, a logger). The
// section lives here, with the adapter, so that cmd/parley only lists it;
// the configuration loader reads it through its toml tags (each key also
// gets its PARLEY_TELEGRAM_<KEY> variable), redacts the keys tagged secret,
// checks that the keys tagged url are http or https URLs, and calls
// Validate for everything else.
type Config struct {
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
	// checked by parley: 1-256 characters of A-Z, a-z, 0-9, _ and -, e.g.
	// from `openssl rand -hex 32`. Required in webhook mode: without it
	// anyone who can reach webhook_url could post updates in the name of an
	// allowed user (user ids are not secret).
	WebhookSecret string `toml:"webhook_secret" secret:"true"`
	// NewFromGeneral makes a message in the group's General topic start a
	// session (in a new topic) as /new would. Default false: the General
	// topic only explains /new.
	NewFromGeneral bool `toml:"new_from_general"`
}

// DefaultConfig is the section when the file and the environment say
// nothing: Telegram's own Bot API server, long polling, and no token, so
// the adapter is off.
func DefaultConfig() Config {
	return Config{APIURL: "https://api.telegram.org", Mode: "polling"}
}

// Enabled reports whether the section turns the adapter on: a token is set.
func (c Config) Enabled() bool { return c.Token != "" }

// Allowed returns the user ids admitted to the adapter's origin, written as
// the adapter writes core.Actor.ID. Never nil: an empty list admits nobody.
func (c Config) Allowed() []string {
	ids := make([]string, 0, len(c.AllowedUsers))
	for _, id := range c.AllowedUsers {
		ids = append(ids, strconv.FormatInt(id, 10))
	}
	return ids
}

// Options returns the adapter options the section sets. The caller adds
// what the daemon provides (Platform does): Cursors, Authorizer, Files,
// Pacer, Transcriber, Logger.
func (c Config) Options() Options {
	return Options{
		Token: c.Token, APIURL: c.APIURL, ChatID: c.ChatID,
		Webhook: c.Mode == "webhook", WebhookURL: c.WebhookURL, WebhookSecret: c.WebhookSecret,
		NewFromGeneral: c.NewFromGeneral,
	}
}

// Validate reports each problem of the section through report, with the
// key inside the section ("chat_id") and what is wrong and how to fix it.
// The loader adds the section and where the key is set, and has already
// checked the URL keys' syntax. A problem never quotes a secret.
func (c Config) Validate(report func(key, problem string)) {
	if c.APIURL == "" {
		report("api_url", "empty; the default is https://api.telegram.org")
	}
	if c.Mode != "polling" && c.Mode != "webhook" {
		report("mode", fmt.Sprintf("%q is not one of polling, webhook", c.Mode))
	}
	if c.WebhookSecret != "" && !webhookSecret.MatchString(c.WebhookSecret) {
		report("webhook_secret", "must be 1-256 characters of A-Z, a-z, 0-9, _ and -")
	}
	if !c.Enabled() {
		def := DefaultConfig()
		if c.ChatID != 0 || len(c.AllowedUsers) > 0 || c.WebhookURL != "" || c.WebhookSecret != "" || c.Mode != def.Mode {
			report("token", "empty, but other [telegram] keys are set; set the token to enable Telegram, or remove them")
		}
		return
	}
	if c.ChatID == 0 {
		report("chat_id", "required with telegram.token: the id of the forum supergroup whose topics hold the sessions")
	}
	if len(c.AllowedUsers) == 0 {
		report("allowed_users", "empty, so the bot would ignore everyone; list the Telegram user ids allowed to use it")
	}
	for _, id := range c.AllowedUsers {
		if id <= 0 {
			report("allowed_users", fmt.Sprintf("%d is not a user id (user ids are positive)", id))
		}
	}
	if c.Mode == "webhook" && c.WebhookURL == "" {
		report("webhook_url", "required when telegram.mode is webhook")
	}
	if c.Mode == "webhook" && c.WebhookSecret == "" {
		report("webhook_secret", "required when telegram.mode is webhook, or anyone who can reach webhook_url "+
			"could post updates as an allowed user; make one with `openssl rand -hex 32` "+
			"(Telegram accepts 1-256 characters of A-Z, a-z, 0-9, _ and -)")
	}
}

// webhookSecret is what Telegram accepts as a webhook's secret_token.
var webhookSecret = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)
