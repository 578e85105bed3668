package web

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-chat/parley/core"
)

// Name is the adapter's name and the origin of input typed on the page.
const Name core.AdapterName = "web"

// Actor is who the page's input is attributed to. The page has no accounts:
// whoever can reach it (past httpguard's token check) is its one person.
var Actor = core.Actor{ID: "web", Name: "You"}

// Defaults of Options.
const (
	DefaultHeartbeat    = 15 * time.Second
	DefaultWriteTimeout = 10 * time.Second
	DefaultMaxStates    = 256
	DefaultMaxBody      = 1 << 20
	DefaultSSEBuffer    = 64
)

// Options configure an Adapter. Handler, Store and Bus may be left nil and
// supplied later (Run's handler, Attach), for wiring where they are built
// after the adapter.
type Options struct {
	// Handler executes the commands of the API and the page. Run's
	// handler argument replaces it.
	Handler core.Handler
	// Store is read for sessions, snapshots and SSE replay; it is never
	// written to (all writes go through Handler).
	Store core.Store
	// Bus feeds the UiState reducers and the SSE streams.
	Bus core.Bus
	// Pairing is what /api/pairing serves (pairing.go). SetPairing
	// replaces it, for wiring where it is built after the adapter.
	Pairing Pairings
	Logger  *slog.Logger
	// Heartbeat is how often an idle SSE stream gets a ": ping" comment.
	Heartbeat time.Duration
	// WriteTimeout bounds each write to an SSE client; a client that does
	// not take a write within it is disconnected.
	WriteTimeout time.Duration
	// MaxStates bounds how many sessions' UiState reducers are kept in
	// memory; the least recently used are dropped and rebuilt on demand.
	MaxStates int
	// MaxBody bounds request bodies in bytes (413 past it).
	MaxBody int64
	// Agents are the agents parley runs, the default first (named
	// "default"), which the page's new-session form offers (GET
	// /api/agents/run); none when it runs none.
	Agents []Agent
	// StreamLifetime is how long an /api/events stream lasts before the
	// server ends it and its client reconnects with Last-Event-ID
	// (lifetime.go); DefaultStreamLifetime when 0.
	StreamLifetime time.Duration
	// MaxStreams bounds the open /api/events streams: a new one past it
	// ends the oldest, which reconnects; DefaultMaxStreams when 0.
	MaxStreams int
	// SSEBuffer is each SSE client's live event buffer; past it events
	// are dropped from the bus feed and re-read from the store. It is
	// allocated whole for every open stream (an event takes about 260
	// bytes of it), and a burst past it costs only a read of the store,
	// so it is small.
	SSEBuffer int
}

// Adapter is the web page's platform adapter and the HTTP API. Its platform
// operations succeed without doing anything: the page renders sessions from
// their UiState, built from the event log, not from messages it was sent.
// It is safe for concurrent use.
type Adapter struct {
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	handler atomic.Pointer[handlerBox]
	mu      sync.Mutex // serialises Attach and detach
	back    atomic.Pointer[backend]

	sent     atomic.Uint64
	idPrefix string
	clients  atomic.Int64
	streams  streamSet                   // lifetime.go
	presence atomic.Pointer[presenceBox] // presence.go
	cluster  atomic.Pointer[clusterBox]  // health.go
	// platforms is what the health probe reports (health.go).
	platforms atomic.Pointer[healthBox]
	pairing   atomic.Pointer[pairingBox] // pairing.go
	backup    atomic.Pointer[backupBox]  // backup.go
}

type handlerBox struct{ h core.Handler }

var (
	_ core.Adapter = (*Adapter)(nil)
	_ core.Binder  = (*Adapter)(nil)
	_ core.Editor  = (*Adapter)(nil)
	_ core.Deleter = (*Adapter)(nil)
)

// New returns an adapter. When opts has both Store and Bus it is attached
// to them at once (see Attach).
func New(opts Options) *Adapter {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = DefaultHeartbeat
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	if opts.MaxStates <= 0 {
		opts.MaxStates = DefaultMaxStates
	}
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.StreamLifetime <= 0 {
		opts.StreamLifetime = DefaultStreamLifetime
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.SSEBuffer <= 0 {
		opts.SSEBuffer = DefaultSSEBuffer
	}
	a := &Adapter{
		opts: opts,
		log:  opts.Logger.With("adapter", string(Name)),
		// Message ids must not repeat across restarts: the cleanup ledger
		// and the output state keep refs.
		idPrefix: strconv.FormatInt(time.Now().UnixNano(), 36) + "-",
	}
	if opts.Handler != nil {
		a.handler.Store(&handlerBox{opts.Handler})
	}
	if opts.Pairing != nil {
		a.SetPairing(opts.Pairing)
	}
	if opts.Store != nil && opts.Bus != nil {
		a.Attach(opts.Store, opts.Bus)
	}
	a.mux = a.routes()
	return a
}

// Attach connects the adapter to the daemon's store and bus: it subscribes
// reliably to the bus (so the in-memory UiStates miss no event) and starts
// feeding the reducers. Call it before serving requests; until then, and
// until a Handler is known, the API answers 503. Attaching again replaces
// the previous store and bus (a daemon restarted around the same adapter).
func (a *Adapter) Attach(store core.Store, bus core.Bus) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if old := a.back.Swap(nil); old != nil {
		old.stop()
	}
	a.back.Store(newBackend(store, bus, a.opts.MaxStates, a.log))
}

// Name implements core.Adapter.
func (a *Adapter) Name() core.AdapterName { return Name }

// Capabilities implements core.Adapter: the page renders markdown, has no
// length or rate limits, shows buttons and "deletes" anything (as no-ops),
// and follows events itself, so core makes no platform operations for it.
func (a *Adapter) Capabilities() core.Capabilities {
	return core.Capabilities{Markup: core.MarkupMarkdown, Buttons: true, DeleteOthers: true, FollowsEvents: true}
}

// Run takes h as the Handler for the API (when h is not nil) and serves
// until ctx is done. Then it detaches: the bus subscription ends, open SSE
// streams are closed and the API answers 503 until attached and run again.
func (a *Adapter) Run(ctx context.Context, h core.Handler) error {
	if h != nil {
		a.handler.Store(&handlerBox{h})
	}
	<-ctx.Done()
	a.Close()
	return nil
}

// Close detaches the adapter from its store and bus and ends the SSE
// streams. Run does it when its context ends; tests that never Run call it.
func (a *Adapter) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handler.Store(nil)
	if b := a.back.Swap(nil); b != nil {
		b.stop()
	}
}

// Send implements core.Adapter. Nothing is sent: the page shows the session
// from its UiState. The reference has a fresh id so that the output state
// and the cleanup ledger can keep it.
func (a *Adapter) Send(_ context.Context, place core.Place, _ core.OutMessage) (core.MessageRef, error) {
	n := a.sent.Add(1)
	return core.MessageRef{Adapter: Name, Place: place, ID: a.idPrefix + strconv.FormatUint(n, 10)}, nil
}

// Edit implements core.Editor as a no-op.
func (a *Adapter) Edit(context.Context, core.MessageRef, core.OutMessage) error { return nil }

// Delete implements core.Deleter as a no-op.
func (a *Adapter) Delete(context.Context, core.MessageRef) error { return nil }

// Bind implements core.Binder without I/O: every session has a place on the
// page, its id. Being a Binder is what lets replies to input typed on the
// page route back here (delivery.Router.Reaches).
func (a *Adapter) Bind(_ context.Context, s core.Session) (core.Binding, error) {
	return core.Binding{Place: place(s.ID)}, nil
}

func place(id core.SessionID) core.Place { return core.Place{Chat: string(id)} }

// SSEClients is the number of open /api/events streams, for metrics.
func (a *Adapter) SSEClients() int { return int(a.clients.Load()) }

// Handler serves the page at "/" (index.html, app.js, style.css, embedded)
// and the API under "/api/". Authentication is the caller's: cmd puts
// httpguard's checks in front of it, the token and the bounds on bodies in
// front of "/api/".
func (a *Adapter) Handler() http.Handler { return a.mux }
