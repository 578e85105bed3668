// Package daemon wires parley together: the store, the bus, the command
// service, the router, the outbox, the dispatcher and the cleanup ledger
// around whatever adapters it is given. cmd/parley builds a Daemon from the
// configuration; end-to-end tests build one on t.TempDir() with the fake
// adapter. It is the only place that knows every package.
//
// The store is the bbolt file parley.db in the data directory, or, when
// Options.StoreURL names one, a PostgreSQL database (store/postgres); the
// data directory then still holds the copies of files agents and people
// send (BlobDir, store/files: every file is copied once as it enters
// parley and delivered and read from that copy). Everything past Open sees
// only store.Store, so both engines run the same code.
//
// Lifecycle: Open opens the store, replays the cleanup deletions that were
// due at the last stop (on PostgreSQL those no other instance holds; every
// instance also scans for them while it runs, see package cleanup),
// replays the delivery journal (every assistant
// message, notice, question, turn-done message and final output not yet
// confirmed by its platform goes out once, skipping the parts that were) and
// re-shows each session's streaming output (the persisted digest turns that
// into no platform call when the platform already shows it, and into an
// edit of the same message when the daemon died mid-stream).
//
// Growth: while it runs, the daemon prunes dedup keys, session reservations
// and cleanup-ledger rows older than Options.Retention every PruneInterval
// (store.Store.Prune); a redelivered platform update is recognised for that
// long. Messages, sessions and undelivered journal entries are never pruned.
// In the same pass it removes the copies of files that no undelivered
// journal entry and no message within the retention refers to, and those a
// crash left without their message (files.Store.Collect).
// Run runs the adapters and the event consumers until its context ends, then
// stops the adapters, drains the outbox for at most DrainTimeout and returns;
// Close closes the store.
//
// Degrade, don't die: Run supervises every adapter. A platform that cannot
// be reached or refuses parley's configuration, at start or later, is
// started again with capped backoff while the others, the page, the API
// and MCP keep serving; its operations wait in the outbox (and journaled
// ones in the store) until it is up; Health says which platform is down
// and why. supervise.go has the details and the decisions.
package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/parley-chat/parley/cleanup"
	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/files"
	"github.com/parley-chat/parley/store/follow"
	"github.com/parley-chat/parley/store/postgres"
)

// Options configure a Daemon.
type Options struct {
	// DataDir holds the bbolt database (unless StoreURL is set) and the
	// copies of files (BlobDir).
	DataDir string
	// StoreURL, when set, is the PostgreSQL database the state is kept in
	// instead of DataDir's bbolt file ([store] url).
	StoreURL string
	// Adapters are the UI adapters to run.
	Adapters []core.Adapter
	// NewAdapters builds more adapters once the store, the bus and the
	// command service exist (the web adapter serves the API from them).
	NewAdapters func(Deps) ([]core.Adapter, error)
	// OnOutputShown receives the edit lag of every output update shown.
	OnOutputShown func(core.AdapterName, time.Duration)
	// Allow is the per-origin allow-list (see commands.Options.Allow).
	Allow map[core.Origin][]string
	// Pairing admits people by one-time codes (commands.PairingOptions).
	Pairing commands.PairingOptions
	// Agents are the agents parley runs (commands.Options.Agents).
	Agents []commands.Agent
	// Reflect copies a person's input to the session's other platforms.
	Reflect bool
	// EditInterval is the least time between two edits of one message,
	// for adapters that declare no edit cadence of their own.
	EditInterval time.Duration
	// MaxBackoff caps the wait between retries of a failed platform call
	// (zero: the outbox's default, one minute).
	MaxBackoff time.Duration
	// Jitter replaces the random jitter of the outbox's retry backoff and
	// of the adapters' start backoff (tests fix it).
	Jitter func() float64
	// OnConfirmed receives, per confirmed journaled operation, the time
	// between the platform's answer and the durable confirmation.
	OnConfirmed func(core.AdapterName, time.Duration)
	// DrainTimeout bounds the outbox drain on shutdown.
	DrainTimeout time.Duration
	// DisabledCleanup lifetimes are never deleted.
	DisabledCleanup map[core.Lifetime]bool
	// Retention is how long dedup keys, session reservations and
	// cleanup-ledger rows are kept (see Prune). Zero means
	// DefaultRetention; negative never prunes.
	Retention time.Duration
	// PruneInterval is how often the pruner runs. Zero means
	// DefaultPruneInterval.
	PruneInterval time.Duration
	// Files bound the copies of files in BlobDir (files.Options: the
	// total, the setting a full store names).
	Files files.Options
	// Store tunes the bbolt store (tests set NoSync for speed).
	Store bolt.Options
	// Postgres tunes the PostgreSQL store when StoreURL is set.
	Postgres postgres.Options
	// Instance names this process among those sharing the store: the
	// holder of its leases, journal claims and cleanup claims. Empty means
	// core.NewInstanceID().
	Instance core.InstanceID
	// Claims tune the journal claims (their Store and Instance are the
	// daemon's); tests shorten them.
	Claims delivery.ClaimOptions
	// CleanupClaims tune the cleanup ledger's claims on a shared store
	// (their Store and Instance are the daemon's); tests shorten them.
	CleanupClaims cleanup.ClaimOptions
	Logger        *slog.Logger
}

// Deps are what adapters built by Options.NewAdapters may use.
type Deps struct {
	Store core.Store
	// Leases is the same store as the lease holder of what must have one
	// consumer among instances (a Telegram long poll, a Matrix sync).
	Leases core.Leaser
	// Bus carries the events this instance committed (Daemon.Bus).
	Bus core.Bus
	// Feed carries every event any instance committed, once and in Seq
	// order (Daemon.Feed): what the web page follows.
	Feed    core.Bus
	Handler core.Handler
	// Authorizer is the allow-lists the Handler keeps, which every chat
	// adapter asks before it acts on a person's input.
	Authorizer core.Authorizer
	// Pairer is the Handler's pairing of strangers (commands.Service).
	Pairer core.Pairer
	// Pacer is the daemon's outbox, for calls an adapter makes itself. It
	// is usable once Open returned (the outbox needs the adapters' limits,
	// so it is built after them).
	Pacer core.Pacer
	// Methods is the same outbox pacing the platform methods an adapter
	// picks per call by its limits on methods (Slack's streaming).
	Methods core.MethodPacer
	// Files keeps the copies of the files people send (Daemon.Files).
	Files  core.FileStore
	Logger *slog.Logger
}

// latePacer forwards to the daemon's outbox, which exists only once every
// adapter was built.
type latePacer struct{ d *Daemon }

func (p latePacer) Do(ctx context.Context, op core.Op) error { return p.d.Outbox.Do(ctx, op) }

func (p latePacer) TakeMethod(a core.AdapterName, place core.Place, method string) time.Duration {
	return p.d.Outbox.TakeMethod(a, place, method)
}

// Daemon is a wired parley.
type Daemon struct {
	Store store.Store
	// Instance names this process among those sharing the store.
	Instance core.InstanceID
	// Bus is the local bus: the events this instance committed
	// (commands.Service publishes them), read by the dispatcher, the
	// cleanup ledger and the metrics, so that each event is delivered by
	// the instance that committed it (what is meant for a platform it does
	// not run is handed over, core/delivery's handoff.go). On PostgreSQL
	// it is unordered: the seqs between its events are other instances'.
	Bus *core.MemBus
	// Feed is the cluster feed: every event of the store's log, whichever
	// instance committed it, once and in Seq order, published by Follower
	// alone; the MCP server and the web page read it.
	Feed *core.MemBus
	// Follower publishes Feed (store/follow).
	Follower   *follow.Follower
	Service    *commands.Service
	Router     *delivery.Router
	Outbox     *delivery.Outbox
	Dispatcher *delivery.Dispatcher
	Ledger     *cleanup.Ledger
	// Files keeps the copies of the files agents and people send, in
	// BlobDir.
	Files *files.Store

	opts Options
	log  *slog.Logger
	// subs are subscribed at Open so that no event published between Open
	// and Run is missed.
	dispatchSub, ledgerSub *core.Subscription
	cancelSubs             []func()
	// startSeq is the last event seq when the daemon opened.
	startSeq uint64
	// local is the local bus as its publishers see it: it knows the last
	// event this instance published, what WaitIdle waits for.
	local *localBus
	// health is every adapter's status; jitter shortens start backoffs
	// (supervise.go).
	health *health
	jitter func() float64
}

// Defaults for Options.
const (
	DefaultRetention     = 30 * 24 * time.Hour
	DefaultPruneInterval = time.Hour
)

// DBFile is the database's name inside the data directory.
const DBFile = "parley.db"

// BlobDir is the directory of the copies of files inside the data
// directory (store/files).
const BlobDir = "blobs"

// Open builds a daemon on opts.DataDir.
func Open(ctx context.Context, opts Options) (*Daemon, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 5 * time.Second
	}
	if opts.Retention == 0 {
		opts.Retention = DefaultRetention
	}
	if opts.PruneInterval <= 0 {
		opts.PruneInterval = DefaultPruneInterval
	}
	if opts.DataDir == "" {
		return nil, errors.New("daemon: no data directory")
	}
	if opts.Instance == "" {
		opts.Instance = core.NewInstanceID()
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: data directory: %w", err)
	}
	blobs, err := files.New(filepath.Join(opts.DataDir, BlobDir), opts.Files)
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	st, err := OpenStore(ctx, opts)
	if err != nil {
		return nil, err
	}
	last, err := st.LastEventSeq(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	d := &Daemon{Store: st, Instance: opts.Instance, Files: blobs, opts: opts, log: opts.Logger, startSeq: last}
	d.Bus = core.NewMemBus(last + 1)
	if opts.StoreURL != "" {
		// Other instances' commits leave gaps in this one's seqs.
		d.Bus = core.NewUnorderedMemBus()
	}
	d.Feed = core.NewMemBus(last + 1)
	// Before anything publishes: the follower subscribes to the local bus
	// at once, so that it misses none of this instance's events.
	d.Follower = follow.New(st, d.Feed, follow.Options{After: last, Local: d.Bus, Listener: st,
		Logger: opts.Logger.With("component", "follow")})
	d.local = &localBus{MemBus: d.Bus, ordered: opts.StoreURL == ""}
	d.Service, err = commands.New(ctx, st, d.local, commands.Options{Allow: opts.Allow, Pairing: opts.Pairing, Agents: opts.Agents,
		Logger: opts.Logger.With("component", "commands")})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if opts.NewAdapters != nil {
		more, err := opts.NewAdapters(Deps{Store: st, Leases: st, Bus: d.local, Feed: d.Feed, Handler: d.Service, Authorizer: d.Service, Pairer: d.Service, Pacer: latePacer{d}, Methods: latePacer{d}, Files: blobs, Logger: opts.Logger})
		if err != nil {
			st.Close()
			return nil, fmt.Errorf("daemon: adapters: %w", err)
		}
		opts.Adapters = append(append([]core.Adapter(nil), opts.Adapters...), more...)
		d.opts.Adapters = opts.Adapters
	}
	d.Router = delivery.NewRouter(opts.Adapters...)
	d.Router.Reflect = opts.Reflect
	d.Outbox = delivery.NewOutbox(delivery.OutboxOptions{EditInterval: opts.EditInterval, MaxBackoff: opts.MaxBackoff, Jitter: opts.Jitter,
		Ledger: paceLedger(st), Logger: opts.Logger.With("component", "outbox")}, opts.Adapters...)
	var ledger *cleanup.Ledger
	d.Dispatcher = delivery.NewDispatcher(st, d.Router, d.Outbox, delivery.DispatcherOptions{
		Files:         blobs,
		OnSent:        func(ctx context.Context, s delivery.Sent) { ledger.Sent(ctx, s) },
		OnOutputShown: opts.OnOutputShown,
		OnConfirmed:   opts.OnConfirmed,
		Claims:        claimOptions(opts.Claims, st, opts.Instance, opts.StoreURL != "", d.Follower),
		Logger:        opts.Logger.With("component", "dispatch"),
	})
	ledger = cleanup.New(st, d.Dispatcher, cleanup.Options{
		Disabled: opts.DisabledCleanup,
		Capabilities: func(name core.AdapterName) (core.Capabilities, bool) {
			a, ok := d.Router.Adapter(name)
			if !ok {
				return core.Capabilities{}, false
			}
			_, del := a.(core.Deleter)
			return a.Capabilities(), del
		},
		Claims: cleanupClaims(opts, st),
		Logger: opts.Logger.With("component", "cleanup"),
	})
	d.Ledger = ledger
	d.health = newHealth(opts.Adapters, time.Now())
	d.jitter = opts.Jitter
	if d.jitter == nil {
		d.jitter = rand.Float64
	}
	// An adapter that checks its platform is held until it did: what the
	// journal replays for it below waits for it to be up (supervise.go).
	for _, a := range opts.Adapters {
		if _, ok := a.(checker); ok {
			d.Outbox.Hold(a.Name(), true)
		}
	}
	var c1, c2 func()
	d.dispatchSub, c1 = d.Bus.Subscribe(4096, false)
	d.ledgerSub, c2 = d.Bus.Subscribe(4096, false)
	d.cancelSubs = []func(){c1, c2}
	if err := d.recover(ctx); err != nil {
		d.Outbox.Close()
		st.Close()
		return nil, err
	}
	return d, nil
}

// claimOptions are the journal claims of instance on st: every journaled
// event is claimed before it is sent, so that among the instances sharing
// st one delivers it (on bbolt every claim is granted). When st is shared
// the instances may run different adapters: an event meant for one this
// instance lacks is handed over, and the scan looks as far as the cluster
// feed (f) has published, so that it finds what others handed over.
func claimOptions(o delivery.ClaimOptions, st store.Store, instance core.InstanceID, shared bool, f *follow.Follower) delivery.ClaimOptions {
	if c, ok := st.(core.DeliveryClaimer); ok {
		o.Store = c
	}
	o.Instance = instance
	if shared {
		o.Shared, o.Seen = true, f.Position
	}
	return o
}

// paceLedger is st's shared pacing ledger when it offers one (PostgreSQL:
// the instances sharing it count the platforms' budgets and pauses
// together), else nil: on bbolt, one instance, the outbox's own count is
// the whole truth.
func paceLedger(st store.Store) core.PaceLedger {
	if l, ok := st.(core.PaceLedger); ok {
		return l
	}
	return nil
}

// cleanupClaims are the cleanup ledger's claims of opts.Instance on st
// when st is shared (PostgreSQL): each due deletion is carried out by one
// instance. A bbolt file has one instance, whose due rows are all its own:
// no claims, and Replay at start-up as ever.
func cleanupClaims(opts Options, st store.Store) cleanup.ClaimOptions {
	o := opts.CleanupClaims
	c, ok := st.(core.CleanupClaimer)
	if !ok || opts.StoreURL == "" {
		return cleanup.ClaimOptions{}
	}
	o.Store, o.Instance = c, opts.Instance
	return o
}

// OpenStore opens the store opts name: the PostgreSQL database at
// StoreURL, or else the bbolt file in DataDir (which must exist).
func OpenStore(ctx context.Context, opts Options) (store.Store, error) {
	opts.Store.Instance = cmp.Or(opts.Store.Instance, opts.Instance)
	opts.Postgres.Instance = cmp.Or(opts.Postgres.Instance, opts.Instance)
	if opts.StoreURL != "" {
		st, err := postgres.Open(ctx, opts.StoreURL, opts.Postgres)
		if err != nil {
			// The error names the host, never the URL: it may hold a
			// password.
			return nil, fmt.Errorf("daemon: the database of [store] url: %w (check that PostgreSQL runs and the url's user, password and database are right: parley doctor says more)", err)
		}
		return st, nil
	}
	st, err := bolt.Open(filepath.Join(opts.DataDir, DBFile), opts.Store)
	if errors.Is(err, bolt.ErrInUse) {
		return nil, fmt.Errorf("another parley is using %s: stop it, or give this one another data directory (data_dir, PARLEY_DATA_DIR)", opts.DataDir)
	}
	if err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	return st, nil
}

// recover resumes what the last run left unfinished.
func (d *Daemon) recover(ctx context.Context) error {
	if err := d.Ledger.Replay(ctx); err != nil {
		return fmt.Errorf("daemon: cleanup replay: %w", err)
	}
	n, err := d.Dispatcher.Replay(ctx, d.startSeq)
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	if n > 0 {
		d.log.Info("replaying undelivered messages", "events", n)
	}
	// Only the sessions with a streaming output, a page at a time: with
	// 100,000 sessions, decoding (and caching) all of them took most of
	// the start-up and more memory than the daemon otherwise uses.
	q := core.SessionQuery{Limit: 1000, Streaming: true}
	for {
		sessions, next, err := d.Store.SessionsPage(ctx, q)
		if err != nil {
			return fmt.Errorf("daemon: %w", err)
		}
		for _, s := range sessions {
			// A final output is journaled until every platform has it;
			// only a streaming one is derived from the session here.
			if s.Status == core.StatusClosed {
				continue
			}
			e := core.Event{Kind: core.EventOutput, Session: s.ID, Text: s.Output, Turn: s.Turn, Final: s.OutputFinal}
			if err := d.Dispatcher.Dispatch(ctx, e); err != nil {
				d.log.Warn("resume output", "session", s.ID, "err", err)
			}
		}
		if next == "" {
			return nil
		}
		q.After = next
	}
}

// Run runs the adapters, each supervised (a failure to start or to keep
// running is retried while the others serve, see supervise.go), and the
// event consumers until ctx ends, then shuts down gracefully: adapters stop
// receiving, the outbox drains for at most DrainTimeout.
func (d *Daemon) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, a := range d.opts.Adapters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.supervise(ctx, a)
		}()
	}
	// The claims stay renewed until the outbox has drained: the last
	// operations of a clean stop are still this instance's to send.
	claimsCtx, stopClaims := context.WithCancel(context.WithoutCancel(ctx))
	var claims sync.WaitGroup
	claims.Go(func() { d.Dispatcher.RunClaims(claimsCtx) })
	claims.Go(func() { d.Ledger.RunClaims(claimsCtx) })
	var consumers sync.WaitGroup
	consumers.Add(4)
	go func() { defer consumers.Done(); _ = d.Follower.Run(ctx) }()
	go func() { defer consumers.Done(); d.Dispatcher.Run(ctx, d.dispatchSub) }()
	go func() { defer consumers.Done(); d.Ledger.Run(ctx, d.ledgerSub) }()
	go func() { defer consumers.Done(); d.prune(ctx) }()
	<-ctx.Done()
	wg.Wait()
	d.log.Info("adapters stopped; draining the outbox", "timeout", d.opts.DrainTimeout)
	drainCtx, stop := context.WithTimeout(context.Background(), d.opts.DrainTimeout)
	defer stop()
	if err := d.Outbox.Drain(drainCtx); err != nil {
		d.log.Warn("outbox not drained; journaled operations go out at the next start", "pending", d.Outbox.Stats().Pending)
	}
	consumers.Wait()
	stopClaims()
	claims.Wait()
	d.Dispatcher.StopTyping()
	return nil
}

// WaitIdle waits until every event this instance published went through
// the dispatcher and the cleanup ledger and the outbox has nothing left to
// do, or ctx ends. Tests use it instead of sleeping. Events other
// instances committed are theirs to deliver: the store's last seq would
// never be reached by this instance's consumers once another commits.
func (d *Daemon) WaitIdle(ctx context.Context) error {
	caughtUp := func() bool {
		last := d.local.last()
		return last == 0 || d.Dispatcher.Seen() == last && d.Ledger.Seen() == last
	}
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !caughtUp() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon: events not consumed: %w", ctx.Err())
		case <-tick.C:
		}
	}
	if err := d.Outbox.Drain(ctx); err != nil {
		return err
	}
	// Confirmations are written after the outbox reports an op done.
	for d.Dispatcher.Delivering() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("daemon: deliveries not confirmed: %w", ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// Leases says, for every lease the store knows, whether this instance
// holds it now (by the store's clock), for /metrics and /api/health.
func (d *Daemon) Leases(ctx context.Context) (map[string]bool, error) {
	infos, err := d.Store.Leases(ctx)
	if err != nil {
		return nil, fmt.Errorf("daemon: leases: %w", err)
	}
	out := make(map[string]bool, len(infos))
	for _, l := range infos {
		out[l.Name] = l.Mine && l.Held
	}
	return out, nil
}

// AgentLeases is what leases a session's agent process to one instance
// (the orchestrator's Options.Leases): the store when several instances
// may share it (PostgreSQL), nil on a bbolt file, which one process owns,
// so that it runs every session's agent as before.
func (d *Daemon) AgentLeases() core.Leaser {
	if d.opts.StoreURL == "" {
		return nil
	}
	return d.Store
}

// Adapters returns the adapters the daemon runs.
func (d *Daemon) Adapters() []core.Adapter { return d.opts.Adapters }

// Close stops the outbox and closes the store.
func (d *Daemon) Close() error {
	for _, c := range d.cancelSubs {
		c()
	}
	d.Outbox.Close()
	// Nothing of this instance's is sent any more: what it did not finish
	// is another instance's to take at once, not at the claims' expiry.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Dispatcher.ReleaseClaims(ctx); err != nil {
		d.log.Warn("journal claims not released; other instances take them over when they expire", "err", err)
	}
	d.Ledger.Stop(ctx)
	return d.Store.Close()
}
