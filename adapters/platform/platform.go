// Package platform is what a chat platform's package tells parley about
// itself: one Platform value, exported as the package's Platform
// (telegram.Platform), naming the platform, its configuration section, its
// constructor and its rate limits. cmd/parley lists those values and
// nothing else of a platform: it loads each one's section, builds the
// adapter of each enabled one with the same Deps, and checks it.
//
// The type lives here, beside the adapters and importing only core, rather
// than in core: it carries what a constructor receives from the daemon
// (a route on parley's HTTP listener, a data directory, a transcriber),
// which is wiring, not the domain core describes. Platform packages
// import it; cmd/parley imports them.
//
// What an adapter must have is in Deps, explicitly, never found by type
// assertion: in particular the Authorizer, which every adapter asks
// before it acts on a person's input (creating a topic, fetching a file,
// saying anything) and without which it is not built. A wrapper around
// the Handler cannot drop that check.
//
// # Adding a platform
//
// A platform is one package, adapters/<name>, and one line in cmd/parley:
//
//   - The package exports Platform, made with Of from its Def: its name
//     (the adapter's name, the origin of its input, its section [<name>]
//     and its variables' prefix PARLEY_<NAME>_), its section's description
//     and its keys' (Doc, KeyDocs), a function returning its section with
//     the defaults, its constructor, and its rate limits as a function of
//     the section.
//   - Its section is a struct of its own with toml tags (its keys), tagged
//     secret:"true" where a value must never be shown and url:"true" where
//     it is a URL, and with doc comments on every field; its methods make
//     it a Section: Validate checks its own rules, Enabled says whether it
//     turns the platform on, Allowed lists the people its allow-list
//     admits. The configuration loader decodes it, sets it from the
//     variables and checks it; the constructor receives it enabled and
//     valid. Nothing else in parley names its keys.
//   - The keys' descriptions in `parley init`'s example are the doc
//     comments of the section's fields, generated into the package's
//     keydocs.go by a TestKeyDocs calling platformtest.KeyDocs and
//     platformtest.CheckKeyDocsFile (run it with -update).
//   - The constructor builds the adapter (a core.Adapter named as the
//     platform) from the section and Deps, passing Deps.Authorizer on; an
//     adapter with a Check method has it run as its start and by
//     `parley doctor`.
//   - cmd/parley/internal/platforms lists the value: one line.
//
// The new adapter must pass core/adaptertest's conformance suite against a
// fake of its platform's API (<name>test, modelled on the platform as it
// documents itself, never on parley), and the end-to-end tests of
// cmd/parley/internal/e2e with a driver for that fake (its harness's doc
// says what a driver is).
package platform

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/parley-chat/parley/core"
)

// Section is a platform's configuration section ([telegram]): a struct of
// the platform's package whose toml tags are its keys. The configuration
// loader checks every key's type and URL keys' form, then Validate.
type Section interface {
	// Validate reports each problem through report: the key inside the
	// section ("chat_id") and what is wrong and how to fix it. The loader
	// prefixes the section and says where the key is set. A problem never
	// quotes a secret.
	Validate(report func(key, problem string))
	// Enabled reports whether the section turns the platform on.
	Enabled() bool
	// Allowed returns the user ids admitted to the platform's origin, as
	// the adapter writes core.Actor.ID; nil admits everyone, an empty list
	// nobody.
	Allowed() []string
}

// Transcriber turns a voice note into text (adapters/transcribe).
type Transcriber interface {
	Transcribe(ctx context.Context, name string, audio []byte) (string, error)
}

// Deps are what every platform's constructor receives besides its section.
type Deps struct {
	// Store is parley's store; adapters keep their cursors in it.
	Store core.Store
	// Leases is the same store's leases, for what must have one consumer
	// among the instances sharing it (a Telegram long poll, a Matrix
	// sync): its holder acts and writes its cursors fenced
	// (core.Leaser.SetCursorFenced); on bbolt the one process holds
	// every lease.
	Leases core.Leaser
	// Bus carries the daemon's events.
	Bus core.Bus
	// Handler executes the commands the adapter makes of people's input;
	// it is also given to the adapter's Run.
	Handler core.Handler
	// Authorizer is the allow-lists, asked before the adapter acts on a
	// person's input; never nil.
	Authorizer core.Authorizer
	// Pairer says whether strangers may ask to be paired (core.Pair); nil
	// when nobody answers pairing requests, and the adapter then sends
	// none.
	Pairer core.Pairer
	// Pacer is the daemon's outbox, for calls an adapter makes itself. It
	// is usable once the daemon is open, not during construction.
	Pacer core.Pacer
	// Methods is the same outbox pacing the platform methods an adapter
	// names in its limits (core.Limit.Methods), for an adapter that
	// chooses the method at call time (Slack's streaming).
	Methods core.MethodPacer
	// Logger is scoped to the adapter: adapter=<name>.
	Logger *slog.Logger
	// Files keeps the copies of the files people send (core.FileStore):
	// an adapter puts what it downloads there and hands the agent the
	// copy. Nil refuses received files with a notice.
	Files core.FileStore
	// Transcriber turns voice notes into text; nil when [transcription]
	// is not set.
	Transcriber Transcriber
	// Route mounts a handler (a webhook) on parley's HTTP listener,
	// outside the guard of browser requests; the handler authenticates its
	// requests itself.
	Route func(path string, h http.Handler)
	// Dial, when set, opens the adapter's connections to its platform
	// (HTTP requests and websockets) instead of the system's dialer; nil
	// in a person's parley. End-to-end tests set it to reach an in-memory
	// fake.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Platform is one chat platform, as its package exports it. Make one with
// Of.
type Platform struct {
	// Name is the adapter's name, the origin of its input, the name of
	// its section and, in upper case, of its variables' prefix.
	Name core.AdapterName
	// Doc describes the section, above it in `parley init`'s example.
	Doc string
	// KeyDocs describe the section's keys ("token"), under each in the
	// example: the doc comments of the section's fields, generated into
	// the platform's package (platformtest.CheckKeyDocsFile).
	KeyDocs map[string]string
	// Section returns a new section holding the defaults, as a pointer
	// into which the configuration is decoded.
	Section func() Section
	// New builds the adapter from a section Section returned (filled,
	// enabled and valid) and the daemon's Deps. Nothing is sent to the
	// platform before the adapter's Check or Run.
	New func(ctx context.Context, s Section, d Deps) (core.Adapter, error)
	// Limits are the rate limits the adapter a section configures
	// declares (core.Capabilities.Limits), per scope and operation kind.
	Limits func(s Section) []core.Limit
}

// Def defines a platform in terms of its own section type S, for Of. Name,
// Doc and KeyDocs are Platform's.
type Def[S Section] struct {
	Name    core.AdapterName
	Doc     string
	KeyDocs map[string]string
	// Default returns S with its defaults.
	Default func() S
	// New builds the adapter from an enabled, valid section.
	New func(context.Context, S, Deps) (core.Adapter, error)
	// Limits are the limits the adapter declares for a section; nil for
	// a platform that declares none (a test's).
	Limits func(S) []core.Limit
}

// Of makes a Platform from its definition, so that the constructor and the
// limits receive S rather than a Section to assert.
func Of[S Section](def Def[S]) Platform {
	section := func(s Section) (S, error) {
		v, ok := any(s).(*S)
		if !ok || v == nil {
			var zero S
			return zero, fmt.Errorf("platform %s: section is a %T, not a *%T", def.Name, s, zero)
		}
		return *v, nil
	}
	return Platform{
		Name:    def.Name,
		Doc:     def.Doc,
		KeyDocs: def.KeyDocs,
		Section: func() Section {
			// *S has S's methods: the assertion cannot fail.
			s := def.Default()
			return any(&s).(Section)
		},
		New: func(ctx context.Context, s Section, d Deps) (core.Adapter, error) {
			v, err := section(s)
			if err != nil {
				return nil, err
			}
			if d.Authorizer == nil {
				return nil, fmt.Errorf("platform %s: no authorizer", def.Name)
			}
			return def.New(ctx, v, d)
		},
		Limits: func(s Section) []core.Limit {
			v, err := section(s)
			if err != nil || def.Limits == nil {
				return nil
			}
			return def.Limits(v)
		},
	}
}
