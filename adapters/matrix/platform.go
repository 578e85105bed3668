package matrix

import (
	"context"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/core"
)

// Platform is Matrix as cmd/parley lists it: the [matrix] section (Config),
// enabled by its homeserver, and the adapter built from it.
var Platform = platform.Of(platform.Def[Config]{
	Name: Name,
	// Doc's lines are the example's comment lines.
	Doc:     "Matrix is the Matrix adapter's section, defined and validated by the\nadapter; enabled when its homeserver is set.",
	KeyDocs: keyDocs,
	Default: DefaultConfig,
	New:     build,
	Limits:  func(c Config) []core.Limit { return limitsFor(c.Options().MessageRate) },
})

// build constructs the adapter from an enabled, valid section. Its sync
// position, filter and a password's login are kept in parley's store.
func build(_ context.Context, s Config, d platform.Deps) (core.Adapter, error) {
	opts := s.Options()
	opts.Cursors, opts.Leases = d.Store, d.Leases
	opts.Files = d.Files
	opts.Authorizer = d.Authorizer
	opts.Transcriber = d.Transcriber
	opts.Pacer = d.Pacer
	opts.Logger = d.Logger
	return New(opts)
}
