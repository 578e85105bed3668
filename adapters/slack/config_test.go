package slack

import (
	"reflect"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	valid := func(mod func(*Config)) Config {
		c := DefaultConfig()
		c.BotToken, c.AppToken, c.Channel, c.AllowedUsers = "xoxb-1-2-abc", "xapp-1-A-abc", "C0123ABCD", []string{"U0123ABCD"}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	tests := []struct {
		name string
		c    Config
		// want are "key: words of the problem"; none means valid.
		want []string
	}{
		{"default, off", DefaultConfig(), nil},
		{"socket mode", valid(nil), nil},
		{"events mode", valid(func(c *Config) { c.Mode, c.AppToken, c.SigningSecret = ModeEvents, "", "s3cret" }), nil},
		{"private channel, workspace user", valid(func(c *Config) { c.Channel, c.AllowedUsers = "G0ABC", []string{"W0ABC", " U1X "} }), nil},
		{"other keys without a token", func() Config { c := DefaultConfig(); c.Channel = "C1X"; return c }(),
			[]string{"bot_token: empty, but other [slack] keys are set"}},
		{"not a bot token", valid(func(c *Config) { c.BotToken = "xoxp-user-token" }), []string{"bot_token: not a bot token: it starts with xoxb-"}},
		{"no channel", valid(func(c *Config) { c.Channel = "" }), []string{"channel: required with slack.bot_token"}},
		{"channel name", valid(func(c *Config) { c.Channel = "#general" }), []string{`channel: "#general" is not a channel id`}},
		{"nobody allowed", valid(func(c *Config) { c.AllowedUsers = nil }), []string{"allowed_users: empty, so the bot would ignore everyone"}},
		{"a name among the users", valid(func(c *Config) { c.AllowedUsers = []string{"U0ABC", "@ann"} }), []string{`allowed_users: "@ann" is not a member id`}},
		{"socket without app token", valid(func(c *Config) { c.AppToken = "" }), []string{"app_token: required in socket mode: an app-level token (xapp-…) with the connections:write scope"}},
		{"app token of the wrong kind", valid(func(c *Config) { c.AppToken = "xoxb-nope" }), []string{"app_token: not an app-level token"}},
		{"events without secret", valid(func(c *Config) { c.Mode = ModeEvents }), []string{"signing_secret: required when slack.mode is events"}},
		{"unknown mode", valid(func(c *Config) { c.Mode = "webhook" }), []string{`mode: "webhook" is not one of socket, events`}},
		{"api url without slash", valid(func(c *Config) { c.APIURL = "https://slack.com/api" }), []string{"api_url: \"https://slack.com/api\" must end with a slash"}},
		{"empty api url", valid(func(c *Config) { c.APIURL = "" }), []string{"api_url: empty; the default is https://slack.com/api/"}},
		{"streaming on", valid(func(c *Config) { c.Stream = true }), nil},
		{"streaming without a token", func() Config { c := DefaultConfig(); c.Stream = true; return c }(),
			[]string{"bot_token: empty, but other [slack] keys are set"}},
		{"events path", valid(func(c *Config) { c.EventsPath = "slack" }), []string{"events_path: \"slack\" must be a path starting with /"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			tt.c.Validate(func(key, problem string) { got = append(got, key+": "+problem) })
			if len(got) != len(tt.want) {
				t.Fatalf("problems %q, want %d like %q", got, len(tt.want), tt.want)
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q lack %q", got, w)
				}
			}
			for _, secret := range []string{tt.c.BotToken, tt.c.AppToken, tt.c.SigningSecret} {
				if len(secret) > 6 && strings.Contains(all, secret) {
					t.Errorf("a problem quotes a secret: %q", got)
				}
			}
		})
	}
}

func TestConfigAllowedAndOptions(t *testing.T) {
	c := DefaultConfig()
	if got := c.Allowed(); got == nil || len(got) != 0 {
		t.Errorf("Allowed of no users = %#v, want an empty, non-nil list", got)
	}
	c.BotToken, c.Channel, c.AllowedUsers, c.Mode, c.SigningSecret = "xoxb-1", "C1", []string{" U1 ", "U2"}, ModeEvents, "s"
	if got := c.Allowed(); strings.Join(got, ",") != "U1,U2" {
		t.Errorf("Allowed = %q", got)
	}
	o := c.Options()
	if !o.Events || o.SigningSecret != "s" || o.Channel != "C1" || o.APIURL != DefaultAPIURL {
		t.Errorf("Options = %+v", o)
	}
	if o.Stream || strings.Join(o.Recipients, ",") != "U1,U2" {
		t.Errorf("Options = %+v: streaming off, recipients the allowed users", o)
	}
	c.Stream = true
	if !c.Options().Stream {
		t.Error("Options: stream = true not passed on")
	}
	if !c.Enabled() || DefaultConfig().Enabled() {
		t.Error("Enabled should follow the bot token")
	}
}

// TestNewNeedsAnAuthorizer: without an allow-list to ask, the adapter is
// not built, rather than admitting everyone.
func TestNewNeedsAnAuthorizer(t *testing.T) {
	if _, err := New(Options{BotToken: "xoxb-test", AppToken: "xapp-test", Channel: "C1"}); err == nil || !strings.Contains(err.Error(), "authorizer") {
		t.Fatalf("New without an Authorizer: %v, want an error naming it", err)
	}
}

// TestPlatformLimits: the limits Platform says a section configures are
// the ones the adapter declares, streaming or not.
func TestPlatformLimits(t *testing.T) {
	for _, stream := range []bool{false, true} {
		c := DefaultConfig()
		c.BotToken, c.AppToken, c.Channel, c.Stream = "xoxb-test", "xapp-test", "C1", stream
		opts := c.Options()
		opts.Authorizer = nobody
		a, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Platform.Limits(&c), a.Capabilities().Limits; !reflect.DeepEqual(got, want) || len(got) == 0 {
			t.Errorf("stream %v: Platform.Limits = %+v, the adapter declares %+v", stream, got, want)
		}
	}
}
