package delivery

import (
	"context"
	"log/slog"
	"maps"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// DefaultTimeout is the deadline of one platform call of kind k when the
// op sets none: long enough for a slow platform, short enough that a hung
// call gives its conversation's lane back within a minute.
func DefaultTimeout(k core.OpKind) time.Duration {
	switch k {
	case core.OpSend:
		return 30 * time.Second
	case core.OpTyping:
		return 10 * time.Second
	default:
		return 20 * time.Second
	}
}

// OutboxOptions tune an Outbox.
type OutboxOptions struct {
	// EditInterval is the least time between two runs of edits with the
	// same Key for adapters that declare no Capabilities.EditInterval:
	// updates in between coalesce, and the newest is flushed when the
	// interval is up, even if the agent has stopped streaming.
	EditInterval time.Duration
	// MaxInFlight bounds concurrent platform calls across all adapters.
	MaxInFlight int
	// MinBackoff and MaxBackoff bound the wait before retrying a failed
	// op: it doubles from MinBackoff with every failure up to MaxBackoff,
	// with jitter. Defaults: 1s and 1 minute.
	MinBackoff, MaxBackoff time.Duration
	// Jitter returns a number in [0, 1) that shortens each backoff by up
	// to a fifth; nil means math/rand. Tests fix it to get exact times.
	Jitter func() float64
	// BacklogWarn is the number of operations waiting for one adapter
	// past which the outbox warns once (default DefaultBacklogWarn).
	BacklogWarn int
	// Logger receives failures, and the platform health and backlog
	// changes (outboxhealth.go).
	Logger *slog.Logger
	// Ledger, when set, shares the rate budgets and the pauses platforms
	// ask for with the other instances of the store that offers it
	// (ledger.go). Nil paces by this outbox's own count alone.
	Ledger core.PaceLedger
}

// OutboxStats are counters for metrics.
type OutboxStats struct {
	Pending     int
	InFlight    int
	Ops         map[core.AdapterName]map[core.OpKind]uint64
	RateLimited map[core.AdapterName]map[core.OpKind]uint64
	// Failed counts operations ended by a permanent refusal.
	Failed map[core.AdapterName]uint64
	// Retries counts transient failures that were retried.
	Retries map[core.AdapterName]uint64
	// Backlog is the number of operations waiting, by adapter.
	Backlog map[core.AdapterName]int
	// Outcomes counts ended operations by adapter and how they ended
	// (Outcome…).
	Outcomes map[core.AdapterName]map[string]uint64
}

// Outbox runs every platform operation of every adapter: keyed and
// coalescing, prioritized (send > delete > edit > rename > typing), paced
// by each adapter's declared Limits as sliding windows per scope, pausing
// exactly the scope a 429 names for its retry_after, and retrying
// transient failures (429, 5xx, resets, timeouts) with capped exponential
// backoff and jitter for as long as the operation is wanted. Only a
// permanent refusal, a newer op with the same Key, or closing the outbox
// ends an operation unsuccessfully; every run has a deadline. A Limit may
// learn its platform's budget rather than take it as given (Limit.Learn,
// learn.go) and keep a share of it for new messages (Limit.SendShare,
// window.reserved). Limits on platform methods count the calls adapters
// ask for with TakeMethod, in the same windows (methods.go). With a shared
// ledger (OutboxOptions.Ledger), budgets and pauses are counted with the
// other instances of a store too (ledger.go).
//
// Scheduling: whenever something could run, the outbox picks, among pending
// ops whose limits all have room, whose scopes are not paused and whose
// Place has nothing in flight, the one with the best priority, then the one
// whose Place was served least recently, then the earliest first enqueue
// (candidate.compare): sessions sharing a group budget are served round robin,
// whatever each has queued. When nothing can run, it sleeps until the
// earliest moment something can — which is what flushes the latest output
// of a stalled agent.
type Outbox struct {
	opts   OutboxOptions
	log    *slog.Logger
	caps   map[core.AdapterName]core.Capabilities
	jitter func() float64

	mu      sync.Mutex
	pending []*entry
	byKey   map[string]*entry // pending (not running) entries by Key
	running map[string]*entry // places with an op in flight, and the op
	lastRun map[string]time.Time
	windows map[string]*window
	// learned holds the budgets learned from the platforms (learn.go).
	learned map[string]*learning
	// recent is, per group, when each of its conversations last ran an
	// op, for competitors.
	recent map[string]map[string]time.Time
	paused map[string]time.Time // scope key → resume time
	// backlog counts pending ops by adapter; backlogged marks those past
	// BacklogWarn; failingSince, adapters whose ops are failing.
	backlog      map[core.AdapterName]int
	backlogged   map[core.AdapterName]bool
	failingSince map[core.AdapterName]time.Time
	held         map[core.AdapterName]bool // not run: outboxhold.go
	expect       map[string]expectation    // by place: outboxexpect.go
	pruneAt      time.Time
	// dequeued counts the entries of pending taken out of the queue and
	// not yet compacted away (dispatchLocked).
	dequeued int
	// ledgerRetryAt is when the shared ledger is asked again after it
	// failed; ledgerDown, that it failed and did not answer since
	// (ledger.go).
	ledgerRetryAt time.Time
	ledgerDown    bool
	// learns is set when an adapter paces by a learned limit.
	learns   bool
	seq      uint64
	inflight int
	closed   bool
	stats    OutboxStats
	wake     chan struct{}
	idle     *sync.Cond

	runCtx context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

type entry struct {
	op        core.Op
	seq       uint64
	notBefore time.Time
	attempts  int
	// dequeued marks an entry taken out of pending, until compactLocked
	// removes it from the slice.
	dequeued bool
	// startedAt is when the current run was paced; prevRun is the Key's
	// last run before it, restored when the run made no call; prevServed
	// is its place's last service before it, restored when the shared
	// ledger refused the run (ledger.go).
	startedAt, prevRun, prevServed time.Time
}

// NewOutbox returns an outbox pacing the given adapters' limits.
func NewOutbox(opts OutboxOptions, adapters ...core.Adapter) *Outbox {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 8
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = time.Second
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = time.Minute
	}
	opts.MaxBackoff = max(opts.MaxBackoff, opts.MinBackoff)
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.BacklogWarn <= 0 {
		opts.BacklogWarn = DefaultBacklogWarn
	}
	ctx, stop := context.WithCancel(context.Background())
	o := &Outbox{
		opts:         opts,
		log:          opts.Logger,
		caps:         map[core.AdapterName]core.Capabilities{},
		jitter:       opts.Jitter,
		byKey:        map[string]*entry{},
		running:      map[string]*entry{},
		lastRun:      map[string]time.Time{},
		windows:      map[string]*window{},
		recent:       map[string]map[string]time.Time{},
		paused:       map[string]time.Time{},
		backlog:      map[core.AdapterName]int{},
		backlogged:   map[core.AdapterName]bool{},
		failingSince: map[core.AdapterName]time.Time{},
		wake:         make(chan struct{}, 1),
		runCtx:       ctx,
		stop:         stop,
		stats:        newStats(),
	}
	o.idle = sync.NewCond(&o.mu)
	for _, a := range adapters {
		c := a.Capabilities()
		o.caps[a.Name()] = c
		for _, l := range c.Limits {
			o.learns = o.learns || l.Learn != nil && len(l.Methods) == 0
		}
	}
	o.wg.Add(1)
	go o.loop()
	return o
}

func newStats() OutboxStats {
	return OutboxStats{
		Ops:         map[core.AdapterName]map[core.OpKind]uint64{},
		RateLimited: map[core.AdapterName]map[core.OpKind]uint64{},
		Failed:      map[core.AdapterName]uint64{},
		Retries:     map[core.AdapterName]uint64{},
		Backlog:     map[core.AdapterName]int{},
		Outcomes:    map[core.AdapterName]map[string]uint64{},
	}
}

// Enqueue adds op, replacing a pending op with the same Key. It never
// blocks on the platform.
func (o *Outbox) Enqueue(op core.Op) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		o.finishLocked(op, core.ErrOutboxClosed)
		return
	}
	if op.Key != "" {
		if e, ok := o.byKey[op.Key]; ok {
			o.finishLocked(e.op, core.ErrSuperseded)
			e.op = op
			e.attempts = 0
			e.notBefore = o.editAfter(op)
			o.signal()
			return
		}
	}
	o.seq++
	e := &entry{op: op, seq: o.seq, notBefore: o.editAfter(op)}
	o.pushLocked(e)
	if op.Key != "" {
		o.byKey[op.Key] = e
	}
	o.signal()
}

func (o *Outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

var _ core.Pacer = (*Outbox)(nil)

// Do implements Pacer. op.Done, if set, is still called.
func (o *Outbox) Do(ctx context.Context, op core.Op) error {
	done := make(chan error, 1)
	then := op.Done
	op.Done = func(err error) {
		if then != nil {
			then(err)
		}
		done <- err
	}
	o.Enqueue(op)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// MovedError is returned by an Op's Run, before it made any platform call
// for its content, when the op turns out to land at another Place than it
// was queued for (the session was bound meanwhile). The outbox queues the op
// again at Place, keeping its turn, so it is paced by that place's limits.
type MovedError struct{ Place core.Place }

func (e *MovedError) Error() string { return "operation moved to another place" }

// Drain waits until no op is pending (but those held, see Hold) or in
// flight, or ctx ends.
func (o *Outbox) Drain(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		o.mu.Lock()
		o.idle.Broadcast()
		o.mu.Unlock()
	})
	defer stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for o.busyLocked() {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		o.idle.Wait()
	}
	return nil
}

// Close stops the outbox: pending ops are dropped (their Done gets
// ErrOutboxClosed) and in-flight calls are cancelled. Call Drain first for
// a graceful stop.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	for _, e := range o.pending {
		o.finishLocked(e.op, core.ErrOutboxClosed)
	}
	o.pending = nil
	clear(o.byKey)
	clear(o.backlog)
	clear(o.backlogged)
	o.mu.Unlock()
	o.stop()
	o.signal()
	o.wg.Wait()
}

// Stats returns a snapshot of the counters.
func (o *Outbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := newStats()
	s.Pending, s.InFlight = len(o.pending), o.inflight
	for a, m := range o.stats.Ops {
		s.Ops[a] = maps.Clone(m)
	}
	for a, m := range o.stats.RateLimited {
		s.RateLimited[a] = maps.Clone(m)
	}
	maps.Copy(s.Failed, o.stats.Failed)
	maps.Copy(s.Retries, o.stats.Retries)
	maps.Copy(s.Backlog, o.backlog)
	for a, m := range o.stats.Outcomes {
		s.Outcomes[a] = maps.Clone(m)
	}
	return s
}
