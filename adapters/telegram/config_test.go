package telegram

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

func TestConfigValidate(t *testing.T) {
	// on is an enabled, valid section, then edited; off a disabled one.
	on := func(edit func(*Config)) Config {
		c := DefaultConfig()
		c.Token, c.ChatID, c.AllowedUsers = "t", -100, []int64{1}
		edit(&c)
		return c
	}
	off := func(edit func(*Config)) Config {
		c := DefaultConfig()
		edit(&c)
		return c
	}
	tests := []struct {
		name string
		c    Config
		want map[string]string // key → substring of its problem
	}{
		{"default", DefaultConfig(), nil},
		{"enabled", on(func(*Config) {}), nil},
		{"webhook", on(func(c *Config) {
			c.Mode, c.WebhookURL, c.WebhookSecret = "webhook", "https://x.example.org/tg", "abc_DEF-1"
		}), nil},
		{"api url emptied", on(func(c *Config) { c.APIURL = "" }),
			map[string]string{"api_url": "empty; the default is https://api.telegram.org"}},
		{"mode", on(func(c *Config) { c.Mode = "push" }),
			map[string]string{"mode": `"push" is not one of polling, webhook`}},
		{"webhook secret", on(func(c *Config) { c.WebhookSecret = "no spaces" }),
			map[string]string{"webhook_secret": "must be 1-256 characters of A-Z, a-z, 0-9, _ and -"}},
		{"webhook secret too long", on(func(c *Config) { c.WebhookSecret = strings.Repeat("a", 257) }),
			map[string]string{"webhook_secret": "must be 1-256 characters"}},
		{"webhook without url", on(func(c *Config) { c.Mode, c.WebhookSecret = "webhook", "abc" }),
			map[string]string{"webhook_url": "required when telegram.mode is webhook"}},
		{"webhook without secret", on(func(c *Config) { c.Mode, c.WebhookURL = "webhook", "https://x.example.org/tg" }),
			map[string]string{"webhook_secret": "required when telegram.mode is webhook, or anyone who can reach webhook_url " +
				"could post updates as an allowed user; make one with `openssl rand -hex 32` " +
				"(Telegram accepts 1-256 characters of A-Z, a-z, 0-9, _ and -)"}},
		{"no chat, no users", on(func(c *Config) { c.ChatID, c.AllowedUsers = 0, nil }),
			map[string]string{"chat_id": "required with telegram.token", "allowed_users": "empty, so the bot would ignore everyone"}},
		{"user id not positive", on(func(c *Config) { c.AllowedUsers = []int64{5, -5} }),
			map[string]string{"allowed_users": "-5 is not a user id (user ids are positive)"}},
		{"keys without token", off(func(c *Config) { c.ChatID = -100 }),
			map[string]string{"token": "empty, but other [telegram] keys are set; set the token to enable Telegram, or remove them"}},
		{"mode without token", off(func(c *Config) { c.Mode = "webhook" }),
			map[string]string{"token": "empty, but other [telegram] keys are set"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			tt.c.Validate(func(key, problem string) { got[key] += problem + "\n" })
			for key, want := range tt.want {
				if !strings.Contains(got[key], want) {
					t.Errorf("%s: got %q, want a problem containing %q", key, got[key], want)
				}
			}
			for key, problem := range got {
				if _, ok := tt.want[key]; !ok {
					t.Errorf("unexpected problem with %s: %s", key, problem)
				}
			}
		})
	}
}

func TestConfigAllowedAndOptions(t *testing.T) {
	c := Config{Token: "t", APIURL: "http://127.0.0.1:1", ChatID: -100, AllowedUsers: []int64{11, 22},
		Mode: "webhook", WebhookURL: "https://x/tg", WebhookSecret: "s", NewFromGeneral: true}
	if got, want := c.Allowed(), []string{"11", "22"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Allowed = %q, want %q", got, want)
	}
	if got := (Config{}).Allowed(); got == nil || len(got) != 0 {
		t.Errorf("Allowed of no users = %#v, want an empty list (admits nobody), not nil (admits everyone)", got)
	}
	want := Options{Token: "t", APIURL: "http://127.0.0.1:1", ChatID: -100, Webhook: true,
		WebhookURL: "https://x/tg", WebhookSecret: "s", NewFromGeneral: true}
	if got := c.Options(); !reflect.DeepEqual(got, want) {
		t.Errorf("Options = %+v, want %+v", got, want)
	}
	if (Config{Mode: "polling"}).Options().Webhook {
		t.Error("polling mode gives webhook options")
	}
}

// TestNewRefusesWebhookWithoutSecret: an adapter built from Options rather
// than a validated Config still cannot serve a webhook anyone could post to.
func TestNewRefusesWebhookWithoutSecret(t *testing.T) {
	_, err := New(Options{Token: "t", Cursors: nopCursors{}, Leases: nopCursors{}, Authorizer: adaptertest.Everyone, Webhook: true, WebhookURL: "https://x.example.org/tg"})
	if err == nil || !strings.Contains(err.Error(), "webhook_secret") {
		t.Fatalf("New in webhook mode without a secret: %v, want an error naming webhook_secret", err)
	}
	if _, err := New(Options{Token: "t", Cursors: nopCursors{}, Leases: nopCursors{}, Authorizer: adaptertest.Everyone, Webhook: true, WebhookURL: "https://x.example.org/tg", WebhookSecret: "abc"}); err != nil {
		t.Fatalf("New with a secret: %v", err)
	}
}

type nopCursors struct{}

func (nopCursors) Cursor(context.Context, string) (string, error)  { return "", nil }
func (nopCursors) SetCursor(context.Context, string, string) error { return nil }

// TestNewNeedsAnAuthorizer: without an allow-list to ask, the adapter is
// not built, rather than admitting everyone.
func TestNewNeedsAnAuthorizer(t *testing.T) {
	if _, err := New(Options{Token: "t", Cursors: nopCursors{}}); err == nil || !strings.Contains(err.Error(), "authorizer") {
		t.Fatalf("New without an Authorizer: %v, want an error naming it", err)
	}
}

// TestNewNeedsLeasesToPoll: long polling must be held by one instance, so
// the adapter is not built without leases to hold it by; a webhook needs
// none.
func TestNewNeedsLeasesToPoll(t *testing.T) {
	if _, err := New(Options{Token: "t", Cursors: nopCursors{}, Authorizer: adaptertest.Everyone}); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("New without Leases: %v, want an error naming them", err)
	}
	if _, err := New(Options{Token: "t", Cursors: nopCursors{}, Authorizer: adaptertest.Everyone, Webhook: true,
		WebhookURL: "https://x.example.org/tg", WebhookSecret: "abc"}); err != nil {
		t.Fatalf("New in webhook mode without Leases: %v", err)
	}
}

// TestPlatformLimits: the limits Platform says a section configures are
// the ones the adapter declares.
func TestPlatformLimits(t *testing.T) {
	c := DefaultConfig()
	c.Token = "t"
	a, err := New(Options{Token: "t", Cursors: nopCursors{}, Leases: nopCursors{}, Authorizer: adaptertest.Everyone})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Platform.Limits(&c), a.Capabilities().Limits; !reflect.DeepEqual(got, want) || len(got) == 0 {
		t.Errorf("Platform.Limits = %+v, the adapter declares %+v", got, want)
	}
}

func (nopCursors) AcquireLease(_ context.Context, name string, _ time.Duration) (core.Lease, bool, error) {
	return core.Lease{Name: name, Holder: "test", Token: 1}, true, nil
}
func (nopCursors) RenewLease(_ context.Context, l core.Lease, _ time.Duration) (core.Lease, error) {
	return l, nil
}
func (nopCursors) ReleaseLease(context.Context, core.Lease) error                    { return nil }
func (nopCursors) Leases(context.Context) ([]core.LeaseInfo, error)                  { return nil, nil }
func (nopCursors) SetCursorFenced(context.Context, string, string, core.Lease) error { return nil }
