package telegram

import (
	"context"
	"fmt"
	"net/url"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/core"
)

// Platform is Telegram as cmd/parley lists it: the [telegram] section
// (Config), enabled by its token, and the adapter built from it.
var Platform = platform.Of(platform.Def[Config]{
	Name: Name,
	// Doc's lines are the example's comment lines.
	Doc:     "Telegram is the Telegram adapter's section, defined and validated by\nthe adapter; enabled when its token is set.",
	KeyDocs: keyDocs,
	Default: DefaultConfig,
	New:     build,
	Limits:  func(Config) []core.Limit { return limits },
})

// build constructs the adapter from an enabled, valid section and, in
// webhook mode, mounts its webhook at the path of webhook_url.
func build(_ context.Context, s Config, d platform.Deps) (core.Adapter, error) {
	opts := s.Options()
	opts.Files = d.Files
	opts.Cursors, opts.Leases = d.Store, d.Leases
	opts.Authorizer, opts.Pairer = d.Authorizer, d.Pairer
	opts.Transcriber = d.Transcriber
	opts.Pacer = d.Pacer
	opts.Logger = d.Logger
	opts.Dial = d.Dial
	a, err := New(opts)
	if err != nil {
		return nil, err
	}
	if opts.Webhook {
		u, err := url.Parse(opts.WebhookURL)
		if err != nil || u.Path == "" || u.Path == "/" {
			return nil, fmt.Errorf("config: telegram.webhook_url %q needs a path (e.g. https://host/telegram) that parley serves", opts.WebhookURL)
		}
		d.Route(u.Path, a.WebhookHandler())
	}
	return a, nil
}
