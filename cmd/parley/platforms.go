package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/transcribe"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
)

// platforms is the table of chat platforms: the one place that lists them.
// A row's name is the adapter's name, its origin, its configuration section
// ([telegram]) and its variables' prefix (PARLEY_TELEGRAM_*).
//
// A row with only a name is a platform parley knows of that this build
// lacks: configuring it stops parley with an error that names it. When its
// adapter lands, its row becomes a platformOf like Telegram's, and its
// section a field of config.Config.
//
// The web adapter is not a row: it is not configured, and always runs.
func platforms() []platform {
	return []platform{
		platformOf("telegram", func(c config.Config) telegram.Config { return c.Telegram }, buildTelegram),
		platformOf("slack", func(c config.Config) slack.Config { return c.Slack }, buildSlack),
		platformOf("matrix", func(c config.Config) matrix.Config { return c.Matrix }, buildMatrix),
		{name: "discord"},
		unlisted(platformOf("fake", func(c config.Config) config.Fake { return c.Fake }, buildFake)),
	}
}

// platform is one row of the table.
type platform struct {
	name string
	// section returns the row's section of a configuration; nil when this
	// build lacks the platform.
	section func(config.Config) section
	// build constructs the adapter from an enabled, valid configuration.
	// Its Check, if it has one, is the adapter's start (the daemon's,
	// retried while the rest serves) and doctor's check of it.
	build func(ctx context.Context, c config.Config, d deps) (core.Adapter, error)
	// unlisted rows (test doubles) are not named to people as platforms.
	unlisted bool
}

// section is what a row needs of its platform's configuration section,
// beyond checking its own keys (config.Section, which config.Load runs).
type section interface {
	config.Section
	// Enabled reports whether the section turns the platform on.
	Enabled() bool
	// Allowed returns the user ids admitted to the platform's origin
	// (commands.Options.Allow), as the adapter writes core.Actor.ID; nil
	// admits everyone, an empty list nobody.
	Allowed() []string
}

// deps are what every platform's constructor may use besides its section.
type deps struct {
	daemon.Deps // the store (for cursors), the bus, the command handler
	// log is scoped to the adapter: adapter=<name>.
	log *slog.Logger
	// dataDir is parley's data directory; received files go below it.
	dataDir string
	// transcriber turns voice notes into text; nil when [transcription]
	// is not set.
	transcriber transcriber
	// route mounts a handler (a webhook) on parley's HTTP listener,
	// outside the guard of browser requests (route.webhook); the handler
	// authenticates its requests itself.
	route func(path string, h http.Handler)
}

// transcriber is what adapters that receive voice notes use of
// adapters/transcribe.
type transcriber interface {
	Transcribe(ctx context.Context, name string, audio []byte) (string, error)
}

// checker is an adapter that can verify its configuration against its
// platform (the token works, the bot has its rights): doctor runs it, and
// the daemon, as the adapter's start.
type checker interface {
	Check(ctx context.Context) error
}

// platformOf makes a row from functions of the platform's own section type
// S, so that its constructor receives S rather than the whole
// configuration.
func platformOf[S section](name string, get func(config.Config) S, build func(context.Context, S, deps) (core.Adapter, error)) platform {
	return platform{
		name:    name,
		section: func(c config.Config) section { return get(c) },
		build: func(ctx context.Context, c config.Config, d deps) (core.Adapter, error) {
			return build(ctx, get(c), d)
		},
	}
}

// unlisted marks a row as a test double.
func unlisted(p platform) platform {
	p.unlisted = true
	return p
}

// knownPlatforms tells the configuration loader which platforms a table
// has and which it lacks.
func knownPlatforms(table []platform) config.Platforms {
	var p config.Platforms
	for _, row := range table {
		switch {
		case row.section == nil:
			p.Absent = append(p.Absent, row.name)
		case !row.unlisted:
			p.Present = append(p.Present, row.name)
		}
	}
	return p
}

// loadConfig loads the configuration for this build's platforms.
func loadConfig(path string, env []string) (config.Config, error) {
	return config.Load(path, env, knownPlatforms(platforms()))
}

// buildAdapters builds the adapter of every platform of the table that
// the configuration enables, in the table's order; with check (doctor), it
// also checks each against its platform and returns the first refusal.
// serve does not: what its configuration sets wrongly within a section (a
// missing token, a webhook URL without a path) stops it here, but a
// platform that cannot be reached or refuses the token only takes itself
// down, as the daemon runs each adapter's Check as its start, retried
// while the rest serves (daemon's supervise.go).
func (m *Main) buildAdapters(ctx context.Context, dd daemon.Deps, check bool) ([]core.Adapter, error) {
	c := m.Config
	var tr transcriber
	if c.Transcription.Enabled() {
		tr = transcribe.New(c.Transcription.APIURL, c.Transcription.APIKey, c.Transcription.Model)
	}
	var adapters []core.Adapter
	for _, p := range m.platforms() {
		if p.section == nil || !p.section(c).Enabled() {
			continue
		}
		a, err := p.build(ctx, c, deps{
			Deps: dd, log: m.Logger.With("adapter", p.name), dataDir: c.DataDir, transcriber: tr,
			route: func(path string, h http.Handler) {
				m.routes = append(m.routes, route{path: path, handler: h, webhook: true})
			},
		})
		if err != nil {
			return nil, err
		}
		// The allow-list is keyed by the row's name and commands carry the
		// adapter's: they must agree, or nobody would be admitted.
		if a.Name() != core.AdapterName(p.name) {
			return nil, fmt.Errorf("platform %s built an adapter named %s", p.name, a.Name())
		}
		if ch, ok := a.(checker); ok && check {
			if err := ch.Check(ctx); err != nil {
				return nil, err
			}
		}
		adapters = append(adapters, a)
	}
	return adapters, nil
}

// platforms is the table Main builds from: the built-in one unless a test
// set its own.
func (m *Main) platforms() []platform {
	if m.table != nil {
		return m.table
	}
	return platforms()
}

// allowLists maps the origin of each enabled platform with an allow-list
// to its allowed users.
func (m *Main) allowLists() map[core.Origin][]string {
	allow := map[core.Origin][]string{}
	for _, p := range m.platforms() {
		if p.section == nil {
			continue
		}
		if s := p.section(m.Config); s.Enabled() {
			if ids := s.Allowed(); ids != nil {
				allow[core.Origin(p.name)] = ids
			}
		}
	}
	return allow
}

// buildTelegram constructs the Telegram adapter and, in webhook mode,
// mounts its webhook at the path of telegram.webhook_url.
func buildTelegram(_ context.Context, s telegram.Config, d deps) (core.Adapter, error) {
	opts := s.Options()
	opts.FileDir = filepath.Join(d.dataDir, "files")
	opts.Cursors = d.Store
	opts.Transcriber = d.transcriber
	opts.Pacer = d.Pacer
	opts.Logger = d.log
	a, err := telegram.New(opts)
	if err != nil {
		return nil, err
	}
	if opts.Webhook {
		u, err := url.Parse(opts.WebhookURL)
		if err != nil || u.Path == "" || u.Path == "/" {
			return nil, fmt.Errorf("config: telegram.webhook_url %q needs a path (e.g. https://host/telegram) that parley serves", opts.WebhookURL)
		}
		d.route(u.Path, a.WebhookHandler())
	}
	return a, nil
}

// buildSlack constructs the Slack adapter and, in events mode, mounts its
// request handler at slack.events_path.
func buildSlack(_ context.Context, s slack.Config, d deps) (core.Adapter, error) {
	opts := s.Options()
	opts.FileDir = filepath.Join(d.dataDir, "files")
	opts.Pacer = d.Pacer
	opts.MethodPacer = d.Methods
	opts.Logger = d.log
	a, err := slack.New(opts)
	if err != nil {
		return nil, err
	}
	if opts.Events {
		d.route(s.EventsPath, a.EventsHandler())
	}
	return a, nil
}

// buildFake constructs the in-memory adapter.
func buildFake(context.Context, config.Fake, deps) (core.Adapter, error) {
	return fake.New("fake", core.Capabilities{Markup: core.MarkupMarkdown, Buttons: true, DeleteOthers: true}), nil
}

// buildMatrix constructs the Matrix adapter. Its sync position, filter and
// a password's login are kept in parley's store.
func buildMatrix(_ context.Context, s matrix.Config, d deps) (core.Adapter, error) {
	opts := s.Options()
	opts.Cursors = d.Store
	opts.FileDir = filepath.Join(d.dataDir, "files")
	opts.Transcriber = d.transcriber
	opts.Pacer = d.Pacer
	opts.Logger = d.log
	return matrix.New(opts)
}
