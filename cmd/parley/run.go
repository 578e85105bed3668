package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/cmd/parley/internal/metrics"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/orchestrator"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version or VCS revision from the build info is used.
var version = ""

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1 // the daemon failed while running
	exitUsage  = 2 // bad arguments or configuration
)

const usage = `parley puts AI agent sessions in front of people where they already chat.

Usage:
  parley serve [--config FILE] [--data-dir DIR] [--listen ADDR]
  parley mcp [--config FILE] [--url URL] [--token TOKEN] [--session ID]
  parley mcp --channel [--config FILE] [--url URL] [--token TOKEN] [--session ID | --title T]
  parley pairing list|approve CODE|deny CODE [--config FILE] [--url URL] [--token TOKEN]
  parley doctor [--config FILE] [--data-dir DIR] [--listen ADDR] [--json]
  parley init [PATH]
  parley service install [--user|--system] [--config FILE] [--dry-run] [--force]
  parley version

Every configuration key can also be set with an environment variable
PARLEY_<SECTION>_<KEY>, e.g. PARLEY_HTTP_LISTEN or PARLEY_LOG_FORMAT.
`

// Run runs the parley command line with args (without the program name) and
// returns the process exit code. ctx ending stops a running daemon
// gracefully.
func Run(ctx context.Context, args, env []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], env, stderr)
	case "mcp":
		return stdioProxy(ctx, args[1:], env, stdin, stdout, stderr)
	case "pairing":
		return pairingCmd(ctx, args[1:], env, stdout, stderr)
	case "doctor":
		return doctor(ctx, args[1:], env, stdout, stderr)
	case "init":
		return initConfig(args[1:], env, stdout, stderr)
	case "service":
		return service(args[1:], env, stdout, stderr)
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "parley", Version())
		return exitOK
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "parley: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}

// Version is parley's version.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}

func serve(ctx context.Context, args, env []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML configuration `file` (default: none; PARLEY_CONFIG)")
	dataDir := fs.String("data-dir", "", "data `directory` (PARLEY_DATA_DIR)")
	listen := fs.String("listen", "", "HTTP listen `address` (PARLEY_HTTP_LISTEN, default 127.0.0.1:8765)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "parley serve: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	// Flags win over the environment and the file: pass them on as the
	// environment variables they stand for, so they are validated alike.
	if *dataDir != "" {
		env = append(env, "PARLEY_DATA_DIR="+*dataDir)
	}
	if *listen != "" {
		env = append(env, "PARLEY_HTTP_LISTEN="+*listen)
	}
	cfg, err := loadConfig(*configPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "parley: invalid configuration:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	log := newLogger(cfg.Log, stderr)
	for _, name := range config.UnknownEnv(without(env, "PARLEY_CONFIG"), knownPlatforms(platforms())) {
		log.Warn("unknown environment variable ignored", "name", name)
	}
	// The checks doctor makes of the address, the data directory and the
	// transcription endpoint, so that serve stops on the same findings.
	// The platforms are not among them: the daemon starts each with its
	// check, and one that is down is retried while the rest serves.
	// Transcription is optional to a running parley: a failure there is
	// only a warning.
	stop := false
	for _, f := range (&checkup{cfg: cfg, serving: true}).preflight(ctx) {
		switch {
		case f.OK:
		case f.Check == "transcription":
			log.Warn("voice messages will not be transcribed", "problem", f.Problem, "fix", f.Fix)
		default:
			log.Error("cannot start", "check", f.Check, "problem", f.Problem, "fix", f.Fix)
			stop = true
		}
	}
	if stop {
		return exitUsage
	}
	m := &Main{Config: cfg, Logger: log, ConfigPath: *configPath}
	if err := m.Open(ctx); err != nil {
		log.Error("start failed", "err", err)
		return exitUsage
	}
	defer m.Close()
	for _, f := range openFiles(*configPath, cfg) {
		log.Warn("open to other users", "check", f.Check, "problem", f.Problem, "fix", f.Fix)
	}
	if err := m.Run(ctx); err != nil {
		log.Error("stopped with an error", "err", err)
		return exitFailed
	}
	return exitOK
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.SlogLevel()}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// Main is a configured daemon: Open builds it, Run serves until the
// context ends, Close releases it.
type Main struct {
	Config config.Config
	Logger *slog.Logger
	// ConfigPath is the file Config was read from, if any: agents may
	// never send it.
	ConfigPath string
	// Adapters, when set before Open, replace the platform adapters built
	// from Config (tests inject fakes this way). The web adapter is always
	// added.
	Adapters []core.Adapter
	// table replaces the table of platforms (tests add their own rows).
	table []platform.Platform

	daemon  *daemon.Daemon
	routes  []route
	web     *web.Adapter
	mcp     *mcp.Server
	metrics *metrics.Metrics
	http    *httpServer
	// agents runs [agent] kind's agent for each session; nil when parley
	// runs none.
	agents *orchestrator.Orchestrator
}

// Open builds the adapters and opens the daemon.
func (m *Main) Open(ctx context.Context) error {
	if m.Logger == nil {
		m.Logger = slog.New(slog.DiscardHandler)
	}
	c := m.Config
	disabled := map[core.Lifetime]bool{
		core.LifetimeNextNotice:   !c.Cleanup.NextNotice,
		core.LifetimeNextInput:    !c.Cleanup.NextInput,
		core.LifetimeTurnComplete: !c.Cleanup.TurnComplete,
	}
	// The registry exists before the daemon, whose start-up replay may
	// already report; its sources are read at scrape time, once the HTTP
	// server (started last) serves.
	met := metrics.New(metrics.Sources{
		Outbox:         func() delivery.OutboxStats { return m.daemon.Outbox.Stats() },
		Delivering:     func() int { return m.daemon.Dispatcher.Delivering() },
		DeliveringBy:   func() map[core.AdapterName]int { return m.daemon.Dispatcher.DeliveringBy() },
		Agents:         func() int { return m.mcp.Agents() },
		Cleanup:        func() (uint64, uint64) { return m.daemon.Ledger.Stats() },
		SSEClients:     func() int { return m.web.SSEClients() },
		MCPSubscribers: func() int { return m.mcp.Subscribers() },
		Platforms:      func() map[core.AdapterName]core.PlatformStatus { return m.daemon.Health().Platforms() },
	})
	d, err := daemon.Open(ctx, daemon.Options{
		DataDir:  c.DataDir,
		Adapters: m.Adapters,
		Allow:    m.allowLists(),
		Pairing:  commands.PairingOptions{Enabled: c.Access.Pairing},
		NewAdapters: func(deps daemon.Deps) ([]core.Adapter, error) {
			m.web = web.New(web.Options{Store: deps.Store, Bus: deps.Bus, Logger: m.Logger.With("adapter", "web")})
			adapters := []core.Adapter{m.web}
			if m.Adapters == nil {
				built, err := m.buildAdapters(ctx, deps, false)
				if err != nil {
					return nil, err
				}
				adapters = append(built, adapters...)
			}
			return adapters, nil
		},
		OnOutputShown:   func(a core.AdapterName, lag time.Duration) { met.OutputShown(a, lag) },
		OnConfirmed:     func(a core.AdapterName, window time.Duration) { met.Confirmed(a, window) },
		EditInterval:    c.Outbox.FlushInterval.Duration,
		DrainTimeout:    c.Outbox.DrainTimeout.Duration,
		DisabledCleanup: disabled,
		Retention:       c.Retention.Duration,
		Reflect:         c.Routing.ReflectInput,
		Logger:          m.Logger,
	})
	if err != nil {
		return err
	}
	m.daemon = d
	m.mcp, err = mcp.New(mcp.Options{Handler: d.Service, Store: d.Store, Bus: d.Bus,
		Logger: m.Logger.With("component", "mcp"), Name: "parley", Version: Version(),
		// The page shows presence itself.
		NoAgentNotice: c.MCP.NoAgentNotice, NoAgentNoticeSkip: []core.Origin{core.Origin(web.Name)},
		SendDirs: c.MCP.SendDirs, Protected: protectedPaths(c.DataDir, m.ConfigPath), MaxSessions: int(c.MCP.MaxSessions)})
	if err != nil {
		d.Close()
		return err
	}
	m.web.SetPresence(m.mcp)
	m.web.SetPlatformHealth(d.Health())
	m.web.SetPairing(d.Service)
	m.metrics = met
	m.http, err = newHTTPServer(serverOptions{Listen: c.HTTP.Listen, Token: c.HTTP.Token, AllowedHosts: c.HTTP.AllowedHosts},
		m.web, m.mcp.Handler(), met, m.routes...)
	if err != nil {
		m.mcp.Close()
		d.Close()
		return err
	}
	agents, runner, err := m.newOrchestrator()
	if err != nil {
		m.http.ln.Close()
		m.mcp.Close()
		d.Close()
		return fmt.Errorf("agent: %w", err)
	}
	if runner != nil {
		// Two processes on one transcript race: what a killed parley left
		// running stops before any conversation is resumed.
		n, err := runner.ReapStale()
		if err != nil {
			m.Logger.Warn("agents of a previous run may still be running", "err", err)
		} else if n > 0 {
			m.Logger.Info("stopped agents a previous run left running", "count", n)
		}
	}
	m.agents = agents
	names := make([]string, 0, len(d.Adapters()))
	for _, a := range d.Adapters() {
		names = append(names, string(a.Name()))
	}
	m.Logger.Debug("configuration", "config", c)
	m.Logger.Info("parley started", "version", Version(), "data_dir", c.DataDir, "adapters", names,
		"listen", m.http.Addr(), "page", "http://"+m.http.Addr()+"/")
	return nil
}

// Addr is the address the HTTP server listens on.
func (m *Main) Addr() string { return m.http.Addr() }

// Run serves until ctx ends, then stops gracefully: the HTTP server stops
// taking requests, the adapters stop, the outbox drains.
func (m *Main) Run(ctx context.Context) error {
	sub, cancel := m.daemon.Bus.Subscribe(1024, false)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); m.metrics.Run(ctx, sub) }()
	go func() { defer wg.Done(); m.mcp.Run(ctx) }()
	var httpErr error
	go func() { defer wg.Done(); httpErr = m.http.serve(ctx) }()
	if m.agents != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.agents.Run(ctx); err != nil {
				m.Logger.Error("the agents stopped", "err", err)
			}
		}()
	}
	err := m.daemon.Run(ctx)
	wg.Wait()
	m.Logger.Info("parley stopped")
	return errors.Join(err, httpErr)
}

// Close closes the MCP server and the store.
func (m *Main) Close() error {
	if m.mcp != nil {
		m.mcp.Close()
	}
	if m.daemon == nil {
		return nil
	}
	return m.daemon.Close()
}

// protectedPaths are parley's own files, which agents never send: the data
// directory and the config file, as absolute paths.
func protectedPaths(paths ...string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		out = append(out, p)
	}
	return out
}

func lookup(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

func without(env []string, key string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, key+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
