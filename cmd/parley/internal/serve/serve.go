// Package serve wires a running parley together: Main builds, from the
// configuration and the table of platforms package main passes it (the
// list in package platforms), the daemon (store, delivery, the platforms'
// adapters), the web adapter, the MCP server, the metrics, the one HTTP
// listener, on a bbolt store its backups (backup.go) and, when [agent]
// asks for it, the orchestrator of the agents parley runs; Open builds it,
// Run serves until its context ends, Close releases it. It knows no platform by name: the table is its input, so
// that adding a platform is a line in package platforms, and an end-to-end
// test can run a Main on 127.0.0.1:0 with a temporary data directory and
// rows of its own (servetest).
//
// Package main keeps what is about the command line: the subcommands,
// flags and configuration loading.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/adapters/web/httpguard"
	"github.com/parley-chat/parley/cmd/parley/internal/backup"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/cmd/parley/internal/metrics"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/orchestrator"
	"github.com/parley-chat/parley/store/files"
	"github.com/parley-chat/parley/store/follow"
)

// Main is a configured daemon: Open builds it, Run serves until the
// context ends, Close releases it.
type Main struct {
	// Config is the loaded and validated configuration.
	Config config.Config
	// Logger receives the daemon's log; nil discards it.
	Logger *slog.Logger
	// ConfigPath is the file Config was read from, if any: agents may
	// never send it.
	ConfigPath string
	// Version is parley's version, as agents and the log are told it.
	Version string
	// Platforms is the table of chat platforms Open builds adapters from:
	// the one list in package platforms, or a test's own rows.
	Platforms []platform.Platform
	// Adapters, when set before Open, replace the platform adapters built
	// from Config (tests inject fakes this way). The web adapter is always
	// added.
	Adapters []core.Adapter
	// Listener, when set before Open, is where the HTTP server serves
	// instead of Config.HTTP.Listen; Run's end closes it. Set by tests
	// only: the end-to-end tests on a fake clock serve on an in-memory
	// network.
	Listener net.Listener
	// Dial, when set before Open, opens the platform adapters'
	// connections instead of the system's dialer (platform.Deps). Set by
	// tests only, to reach in-memory fakes.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)

	daemon *daemon.Daemon
	routes []route
	web    *web.Adapter
	mcp    *mcp.Server
	// presence is the agents' presence across the instances sharing the
	// store (store/follow).
	presence *follow.Presence
	metrics  *metrics.Metrics
	http     *httpServer
	// agents runs each session's agent ([agent], [agents.NAME]); nil when
	// parley runs none.
	agents *orchestrator.Orchestrator
	// agentClosers stop the agents' processes after agents ends.
	agentClosers []func() error
	// daily takes the backups of [store] backup_dir; nil without one
	// (backup.go).
	daily *backup.Daily
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
	// One id for this process among those sharing the store: it holds the
	// leases and the journal claims, and announces its agents.
	instance := core.NewInstanceID()
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
		Instance:       string(instance),
		Leases: func() (map[string]bool, error) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			return m.daemon.Leases(ctx)
		},
	})
	d, err := daemon.Open(ctx, daemon.Options{
		DataDir:  c.DataDir,
		Files:    files.Options{MaxTotal: c.FilesMaxMB << 20, Setting: "files_max_mb (PARLEY_FILES_MAX_MB)"},
		StoreURL: c.Store.URL,
		Instance: instance,
		Adapters: m.Adapters,
		Allow:    m.AllowLists(),
		Pairing:  commands.PairingOptions{Enabled: c.Access.Pairing},
		Agents:   commandAgents(c),
		NewAdapters: func(deps daemon.Deps) ([]core.Adapter, error) {
			m.web = web.New(web.Options{Store: deps.Store, Bus: deps.Feed, Agents: webAgents(c), Logger: m.Logger.With("adapter", "web")})
			adapters := []core.Adapter{m.web}
			if m.Adapters == nil {
				built, err := m.BuildAdapters(ctx, deps, false)
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
	// The MCP server notifies agents of every instance's events (the
	// cluster feed) and sends the no-agent notice for this one's own.
	m.mcp, err = mcp.New(mcp.Options{Handler: d.Service, Store: d.Store, Bus: d.Feed, Local: d.Bus,
		Logger: m.Logger.With("component", "mcp"), Name: "parley", Version: m.Version,
		// The page shows presence itself.
		NoAgentNotice: c.MCP.NoAgentNotice, NoAgentNoticeSkip: []core.Origin{core.Origin(web.Name)},
		SendDirs: c.MCP.SendDirs, Protected: protectedPaths(c.DataDir, m.ConfigPath), Files: d.Files, MaxSessions: int(c.MCP.MaxSessions)})
	if err != nil {
		d.Close()
		return err
	}
	// Presence is the same from every instance: this one's agents and
	// those the others announce.
	m.presence = follow.NewPresence(m.mcp, d.Store, follow.PresenceOptions{Instance: string(d.Instance),
		Logger: m.Logger.With("component", "presence")})
	m.mcp.SetNoticePresence(m.presence)
	m.web.SetPresence(m.presence)
	m.web.SetPlatformHealth(d.Health())
	m.web.SetPairing(d.Service)
	m.openBackups()
	m.web.SetCluster(string(d.Instance), func(ctx context.Context) ([]string, error) {
		held, err := d.Leases(ctx)
		var names []string
		for name, mine := range held {
			if mine {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		return names, err
	}, func(r *http.Request) bool { return httpguard.HasToken(c.HTTP.Token, r) })
	m.metrics = met
	m.http, err = newHTTPServer(serverOptions{Listen: c.HTTP.Listen, Listener: m.Listener, Token: c.HTTP.Token, AllowedHosts: c.HTTP.AllowedHosts,
		MCPCredential: m.mcp.AgentAuthorized},
		m.web, m.mcp.Handler(), met, m.routes...)
	if err != nil {
		m.mcp.Close()
		d.Close()
		return err
	}
	agents, reapers, err := m.newOrchestrator()
	if err != nil {
		m.http.ln.Close()
		m.mcp.Close()
		d.Close()
		return fmt.Errorf("agent: %w", err)
	}
	for _, reap := range reapers {
		// Two processes on one transcript race: what a killed parley left
		// running stops before any conversation is resumed.
		n, err := reap()
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
	m.Logger.Info("parley started", "version", m.Version, "data_dir", c.DataDir, "store", storeName(c), "instance", d.Instance, "adapters", names,
		"listen", m.http.Addr(), "page", "http://"+m.http.Addr()+"/")
	return nil
}

// Daemon is the daemon Open opened: its store, outbox and health, for
// what looks inside a running parley (the end-to-end tests).
func (m *Main) Daemon() *daemon.Daemon { return m.daemon }

// Presence is the agents' presence across every instance sharing the
// store, as the page and the no-agent notice see it.
func (m *Main) Presence() core.Presence { return m.presence }

// Addr is the address the HTTP server listens on.
func (m *Main) Addr() string { return m.http.Addr() }

// Run serves until ctx ends, then stops gracefully: the HTTP server stops
// taking requests, the adapters stop, the outbox drains.
func (m *Main) Run(ctx context.Context) error {
	sub, cancel := m.daemon.Bus.Subscribe(1024, false)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(5)
	go func() { defer wg.Done(); m.metrics.Run(ctx, sub) }()
	go func() { defer wg.Done(); m.runBackups(ctx) }()
	go func() { defer wg.Done(); _ = m.presence.Run(ctx) }()
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
			m.closeAgents()
		}()
	}
	err := m.daemon.Run(ctx)
	wg.Wait()
	m.Logger.Info("parley stopped")
	return errors.Join(err, httpErr)
}

// Close closes the MCP server and the store, and stops the agents'
// processes if Run did not.
func (m *Main) Close() error {
	m.closeAgents()
	if m.mcp != nil {
		m.mcp.Close()
	}
	if m.daemon == nil {
		return nil
	}
	return m.daemon.Close()
}

// storeName says which engine keeps the state, for the log: never the
// URL, which may hold a password.
func storeName(c config.Config) string {
	if c.Store.URL != "" {
		return "postgres"
	}
	return "bbolt"
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
