// Package follow publishes the store's event log on a bus, so that every
// instance of parley sharing one database tells its MCP agents and web
// pages of what any instance stored.
//
// A Follower is, on each instance, the one publisher of a bus carrying
// every logged event exactly once and in Seq order, whichever instance
// committed it (the "cluster feed": the MCP server and the web page read
// it). It holds one position, the last Seq it published, and only ever
// publishes position+1, from one goroutine: that is the whole of its
// exactly-once argument. The store is the truth; everything else only says
// when to read it:
//
//   - the local bus (what this instance's commands.Service publishes after
//     its own commits): an event that is exactly position+1 is published as
//     it is, without reading the store, so on a single instance (bbolt) the
//     follower is one goroutine hop and no reads; an event further ahead
//     means other instances committed in between, and the log is read. Its
//     subscription is lossy, so the follower never slows a writer down; a
//     drop only makes it read the log;
//   - a Listener (PostgreSQL LISTEN/NOTIFY: every commit of events notifies
//     from its own transaction, with the new last Seq): a hint for a Seq not
//     yet published wakes the follower, hints coalesce into one read;
//   - a poll every Options.Poll (one second by default) after the last
//     read, so a hint lost with a dropped connection delays and loses
//     nothing.
//
// Reads go through EventsSince in batches until the log is exhausted. When
// the follower fell behind the bounded log (core.ErrEventsTruncated: the
// events after its position were trimmed before it read them) it cannot
// publish what it missed; it publishes one core.EventResync whose Seq is the
// newest event's, telling readers to re-read from the store what they
// derive from events, and follows on from there. A store that fails is
// read again at the next wake or poll; the position never moves past what
// was published.
//
// The package also makes agent presence the same from every instance
// (presence.go): a Presence sums the local MCP server's status and those
// the other instances announce over an Exchange (NOTIFY on PostgreSQL, a
// no-op on bbolt), forgetting an instance that stops at once and one that
// died after three heartbeats.
//
// Wiring, on every engine: the daemon's local bus (commands.Service
// publishes there; the dispatcher, the cleanup ledger and the metrics
// consume it, so that each event is delivered to platforms by the instance
// that committed it) is core.NewMemBus(last+1) on bbolt and
// core.NewUnorderedMemBus() on PostgreSQL, where the seqs between its own
// events are other instances'. The cluster feed is core.NewMemBus(last+1),
// published by New(store, feed, Options{After: last, Local: local,
// Listener: store}) alone, and read by the MCP server and the web adapter.
// The web page's presence is NewPresence(mcpServer, store, …).
package follow

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parley-chat/parley/core"
)

// Log is what a Follower reads: the store's event log (core.Store has it).
type Log interface {
	EventsSince(ctx context.Context, after uint64, limit int) ([]core.Event, error)
	LastEventSeq(ctx context.Context) (uint64, error)
}

// Listener tells of commits of events by any instance. store/postgres
// implements it with LISTEN/NOTIFY; store/bolt, whose single instance
// publishes everything locally, by waiting for ctx.
type Listener interface {
	// Listen calls hint with the last Seq of each commit of events, by any
	// instance, as it hears of them, until ctx ends (then it returns nil)
	// or it stops hearing (then it returns the error). Once it listens it
	// calls hint(0): commits before that were not heard. hint does not
	// block.
	Listen(ctx context.Context, hint func(seq uint64)) error
}

// Defaults of Options.
const (
	DefaultPoll  = time.Second
	DefaultBatch = 512
	// DefaultLocalBuffer is the local subscription's buffer.
	DefaultLocalBuffer = 4096
	// minRelisten and maxRelisten bound the wait before listening again
	// after the Listener stopped; it doubles while listening keeps failing
	// at once.
	minRelisten = 100 * time.Millisecond
	maxRelisten = 30 * time.Second
)

// Options configure a Follower.
type Options struct {
	// After is the Seq already published: the store's LastEventSeq when
	// the daemon started, the bus's first event being After+1.
	After uint64
	// Local is the bus this instance's own commits are published on; nil
	// means the log is read for every event.
	Local core.Bus
	// Listener hints at commits; nil means polling (and Local) alone.
	Listener Listener
	// Poll is how long the follower waits without reading before it reads
	// anyway. Zero means DefaultPoll.
	Poll time.Duration
	// Batch is how many events one read asks for. Zero means DefaultBatch.
	Batch int
	// Logger reports a failing store or listener once per outage.
	Logger *slog.Logger
}

// Follower publishes the event log on a bus, exactly once and in order. See
// the package documentation.
type Follower struct {
	log  Log
	bus  core.Bus
	opts Options

	pos  atomic.Uint64 // last Seq published
	wake chan struct{} // capacity 1: hints coalesce

	local       *core.Subscription // nil without Options.Local
	cancelLocal func()

	failing bool // the last read failed; only the Run goroutine uses it
}

// New returns a follower of log that publishes on bus. It subscribes to
// opts.Local at once, so nothing published from now on is missed; Run
// starts following.
func New(log Log, bus core.Bus, opts Options) *Follower {
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Follower{log: log, bus: bus, opts: opts, wake: make(chan struct{}, 1), cancelLocal: func() {}}
	f.pos.Store(opts.After)
	if opts.Local != nil {
		f.local, f.cancelLocal = opts.Local.Subscribe(DefaultLocalBuffer, true)
	}
	return f
}

// Position is the Seq of the last event published (or covered by a resync).
func (f *Follower) Position() uint64 { return f.pos.Load() }

// Hint tells the follower that events up to seq were committed (0: some
// were, Seq unknown). A seq already published is ignored; otherwise the
// follower reads the log soon. It never blocks, and hints given while the
// follower is busy make one read.
func (f *Follower) Hint(seq uint64) {
	if seq != 0 && seq <= f.pos.Load() {
		return
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Run follows the log until ctx ends. It returns nil then; a failing store
// or listener is logged and retried, never returned.
func (f *Follower) Run(ctx context.Context) error {
	defer f.cancelLocal()
	var wg sync.WaitGroup
	defer wg.Wait()
	if f.opts.Listener != nil {
		wg.Go(func() { f.listen(ctx) })
	}
	var localC <-chan core.Event
	var dropped uint64
	if f.local != nil {
		localC = f.local.C
		dropped = f.local.Dropped()
	}
	poll := time.NewTimer(0) // the first read is at once
	defer poll.Stop()
	for {
		read := false
		select {
		case <-ctx.Done():
			return nil
		case <-poll.C:
			read = true
		case <-f.wake:
			read = true
		case e := <-localC:
			read = !f.offer(e)
		}
		// Events dropped at the end of a burst leave no later event to
		// reveal the gap: look whenever the local feed is drained.
		if f.local != nil && len(localC) == 0 {
			if n := f.local.Dropped(); n != dropped {
				dropped, read = n, true
			}
		}
		if read {
			f.catchUp(ctx)
			poll.Reset(f.opts.Poll) // no stale tick survives a Reset (Go 1.23)
		}
	}
}

// offer takes an event of the local bus. It reports false when the log must
// be read: the event lies beyond the next one (other instances committed
// the events in between).
func (f *Follower) offer(e core.Event) bool {
	pos := f.pos.Load()
	switch {
	case e.Seq == 0 || e.Seq <= pos:
		return true // not logged, or published already from the log
	case e.Seq == pos+1:
		f.publish(e)
		return true
	}
	return false
}

func (f *Follower) publish(e core.Event) {
	f.bus.Publish(e)
	f.pos.Store(e.Seq)
}

// catchUp publishes every event of the log after the position.
func (f *Follower) catchUp(ctx context.Context) {
	for ctx.Err() == nil {
		pos := f.pos.Load()
		evs, err := f.log.EventsSince(ctx, pos, f.opts.Batch)
		if errors.Is(err, core.ErrEventsTruncated) {
			if !f.resync(ctx, err) {
				return
			}
			continue
		}
		if err != nil {
			f.fail(ctx, err)
			return
		}
		f.recovered()
		for _, e := range evs {
			if e.Seq <= f.pos.Load() {
				continue // not after pos: a store that broke its contract
			}
			f.publish(e)
		}
		if len(evs) < f.opts.Batch {
			return
		}
	}
}

// resync jumps to the newest event after the log lost events the follower
// had not published, telling readers with an EventResync. It reports
// whether it jumped.
func (f *Follower) resync(ctx context.Context, cause error) bool {
	last, err := f.log.LastEventSeq(ctx)
	if err != nil {
		f.fail(ctx, err)
		return false
	}
	pos := f.pos.Load()
	if last <= pos {
		f.fail(ctx, cause) // a log truncated after its own end: not ours to fix
		return false
	}
	f.opts.Logger.Warn("fell behind the event log: readers resync from the store",
		"published", pos, "newest", last, "err", cause)
	f.publish(core.Event{Seq: last, Kind: core.EventResync, Time: time.Now().UTC()})
	return true
}

func (f *Follower) fail(ctx context.Context, err error) {
	if ctx.Err() != nil || f.failing {
		return
	}
	f.failing = true
	f.opts.Logger.Warn("cannot read the event log; trying again", "after", f.pos.Load(), "err", err)
}

func (f *Follower) recovered() {
	if f.failing {
		f.failing = false
		f.opts.Logger.Info("reading the event log again", "after", f.pos.Load())
	}
}

// listen keeps the Listener listening, waiting longer after each failure
// that came at once, until ctx ends.
func (f *Follower) listen(ctx context.Context) {
	wait := minRelisten
	for {
		start := time.Now()
		err := f.opts.Listener.Listen(ctx, f.Hint)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxRelisten {
			wait = minRelisten // it listened for a while: a new outage
		}
		f.opts.Logger.Warn("not hearing of other instances' commits; polling meanwhile",
			"poll", f.opts.Poll, "retry_in", wait, "err", err)
		f.Hint(0) // a commit may have gone unheard
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxRelisten)
	}
}
