package matrix

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	ok.Homeserver, ok.UserID, ok.AccessToken, ok.AllowedUsers = "https://matrix.example.org", "@parley:example.org", "syt-secret", []string{"@ada:example.org"}
	tests := []struct {
		name string
		edit func(*Config)
		want []string // key: substring of the problem; empty means valid
	}{
		{"valid", func(*Config) {}, nil},
		{"valid with password and space", func(c *Config) { c.AccessToken, c.Password, c.Space = "", "pw", "#sessions:example.org" }, nil},
		{"off", func(c *Config) { *c = DefaultConfig() }, nil},
		{"no budget", func(c *Config) { c.MessagesPerMinute, c.MessageBurst = 0, -1 }, []string{"messages_per_minute: 0 must be positive", "message_burst: -1 must be positive"}},
		{"keys without homeserver", func(c *Config) { c.Homeserver = "" }, []string{"homeserver: empty, but other [matrix] keys are set"}},
		{"no user", func(c *Config) { c.UserID = "" }, []string{"user_id: required"}},
		{"bare localpart", func(c *Config) { c.UserID = "parley" }, []string{`user_id: "parley" is not a full Matrix id`}},
		{"no credentials", func(c *Config) { c.AccessToken = "" }, []string{"access_token: required", "matrix.password"}},
		{"both credentials", func(c *Config) { c.Password = "pw" }, []string{"password: set together with matrix.access_token"}},
		{"nobody allowed", func(c *Config) { c.AllowedUsers = nil }, []string{"allowed_users: empty"}},
		{"allowed by name", func(c *Config) { c.AllowedUsers = []string{"ada"} }, []string{`allowed_users: "ada" is not a full Matrix id`}},
		{"space by name", func(c *Config) { c.Space = "Sessions" }, []string{`space: "Sessions" is neither a room id`}},
		{"homeserver with query", func(c *Config) { c.Homeserver = "https://m.example.org/?x=1" }, []string{"homeserver:", "has a query"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			var got []string
			c.Validate(func(key, problem string) { got = append(got, key+": "+problem) })
			all := strings.Join(got, "\n")
			if len(tt.want) == 0 && len(got) > 0 {
				t.Fatalf("problems for a valid section:\n%s", all)
			}
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems do not say %q:\n%s", w, all)
				}
			}
			if strings.Contains(all, "syt-secret") || strings.Contains(all, `"pw"`) {
				t.Errorf("a problem quotes a secret:\n%s", all)
			}
		})
	}
}

func TestConfigOptions(t *testing.T) {
	c := Config{Homeserver: "https://m.example.org", UserID: " @parley:example.org ", Password: "pw",
		AllowedUsers: []string{" @ada:example.org"}, Space: "!s:example.org"}
	o := c.Options()
	if o.UserID != "@parley:example.org" || o.Password != "pw" || len(o.Allowed) != 1 || o.Allowed[0] != "@ada:example.org" || o.Space != "!s:example.org" {
		t.Errorf("Options = %+v", o)
	}
	if o.MessageRate.N != 0 {
		t.Errorf("a section without a budget set a rate %+v", o.MessageRate)
	}
	if r := DefaultConfig().Options().MessageRate; r != (core.Rate{N: 5, Per: 25 * time.Second}) {
		t.Errorf("the default budget is %+v, want 5 per 25 s within Synapse's 0.2/s with bursts of 10", r)
	}
	if got := (Config{}).Allowed(); got == nil || len(got) != 0 {
		t.Errorf("Allowed of an empty list = %#v, want empty and not nil (nobody, not everyone)", got)
	}
}

// TestNewNeedsAnAuthorizer: without an allow-list to ask, the adapter is
// not built, rather than admitting the configured list or everyone.
func TestNewNeedsAnAuthorizer(t *testing.T) {
	_, err := New(Options{Homeserver: "https://matrix.example.org", UserID: "@parley:example.org", AccessToken: "t", Cursors: nopCursors{}})
	if err == nil || !strings.Contains(err.Error(), "authorizer") {
		t.Fatalf("New without an Authorizer: %v, want an error naming it", err)
	}
}

// TestNewNeedsLeases: the sync must be held by one instance, so the
// adapter is not built without leases to hold it by.
func TestNewNeedsLeases(t *testing.T) {
	_, err := New(Options{Homeserver: "https://matrix.example.org", UserID: "@parley:example.org", AccessToken: "t", Cursors: nopCursors{},
		Authorizer: adaptertest.Everyone})
	if err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("New without Leases: %v, want an error naming them", err)
	}
}

// TestPlatformLimits: the limits Platform says a section configures are
// the ones the adapter declares, at the default budget and a configured
// one.
func TestPlatformLimits(t *testing.T) {
	for _, perMinute := range []int64{0, 60} {
		c := DefaultConfig()
		c.Homeserver, c.UserID, c.AccessToken = "https://matrix.example.org", "@parley:example.org", "t"
		if perMinute > 0 {
			c.MessagesPerMinute = perMinute
		}
		opts := c.Options()
		opts.Cursors, opts.Leases, opts.Authorizer = nopCursors{}, nopCursors{}, adaptertest.Everyone
		a, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := Platform.Limits(&c), a.Capabilities().Limits; !reflect.DeepEqual(got, want) || len(got) == 0 {
			t.Errorf("%d a minute: Platform.Limits = %+v, the adapter declares %+v", perMinute, got, want)
		}
	}
}
