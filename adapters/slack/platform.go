package slack

import (
	"context"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/core"
)

// Platform is Slack as cmd/parley lists it: the [slack] section (Config),
// enabled by its bot token, and the adapter built from it.
var Platform = platform.Of(platform.Def[Config]{
	Name: Name,
	// Doc's lines are the example's comment lines.
	Doc:     "Slack is the Slack adapter's section, defined and validated by the\nadapter; enabled when its bot token is set.",
	KeyDocs: keyDocs,
	Default: DefaultConfig,
	New:     build,
	Limits:  func(c Config) []core.Limit { return limitsFor(c.Stream) },
})

// build constructs the adapter from an enabled, valid section and, in
// events mode, mounts its request handler at events_path.
func build(_ context.Context, s Config, d platform.Deps) (core.Adapter, error) {
	opts := s.Options()
	opts.Files = d.Files
	opts.Authorizer, opts.Pairer = d.Authorizer, d.Pairer
	opts.MethodPacer = d.Methods
	opts.Pacer = d.Pacer
	opts.Logger = d.Logger
	opts.Dial = d.Dial
	a, err := New(opts)
	if err != nil {
		return nil, err
	}
	if opts.Events {
		d.Route(s.EventsPath, a.EventsHandler())
	}
	return a, nil
}
