package core

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// OpKind is the kind of a platform operation; its order is the priority.
type OpKind int

// Operation kinds, highest priority first: a new message matters more than
// tidying up, and tidying up more than one more edit of a streaming message.
const (
	OpSend OpKind = iota
	OpDelete
	OpEdit
	OpRename
)

func (k OpKind) String() string {
	return [...]string{"send", "delete", "edit", "rename"}[k]
}

// Op is one platform operation for the Outbox.
type Op struct {
	Kind    OpKind
	Adapter AdapterName
	// Place is where the operation lands, for pacing. The zero Place
	// (a session not yet bound) is paced by the adapter's global limit.
	Place Place
	// Key coalesces: while an op with the same Key is still pending, a new
	// one replaces it in place (keeping its turn in the queue). Empty Key
	// never coalesces.
	Key string
	// Final ops are never given up on: they are retried (with backoff)
	// until they succeed, fail permanently or the outbox is closed.
	Final bool
	// Run performs the operation at place (the op's Place, as paced). It
	// is called with no outbox lock held, at most once at a time per
	// Place, and returns the platform's error.
	Run func(ctx context.Context, place Place) error
	// Done, if set, is called once with the final outcome (nil on success,
	// or the error the op was given up with). It is not called for an op
	// replaced by a newer one with the same Key.
	Done func(error)
}

// OutboxOptions tune an Outbox.
type OutboxOptions struct {
	// EditInterval is the least time between two runs of edits with the
	// same Key: updates in between coalesce, and the newest is flushed when
	// the interval is up, even if the agent has stopped streaming.
	EditInterval time.Duration
	// MaxInFlight bounds concurrent platform calls across all adapters.
	MaxInFlight int
	// MaxAttempts bounds retries of a failed non-final op.
	MaxAttempts int
	// Logger receives failures.
	Logger *slog.Logger
}

// OutboxStats are counters for metrics.
type OutboxStats struct {
	Pending     int
	InFlight    int
	Ops         map[AdapterName]map[OpKind]uint64
	RateLimited map[AdapterName]map[OpKind]uint64
	Failed      map[AdapterName]uint64
}

// Outbox runs every platform operation of every adapter: keyed and
// coalescing, prioritized (send > delete > edit > rename), paced by each
// adapter's declared Limits with token buckets per chat, per group and
// global, pausing a chat group for the retry_after a platform asks for, and
// retrying failures with backoff.
//
// Scheduling: whenever something could run, the outbox picks, among pending
// ops whose buckets all have a token and whose Place has nothing in flight,
// the one with the best priority and then the earliest first enqueue. Since a
// coalesced op keeps its place and a session re-enters at the back after each
// run, sessions sharing a group budget are served round robin. When nothing
// can run, it sleeps until the earliest moment something can — which is
// what flushes the latest output of a stalled agent.
type Outbox struct {
	opts   OutboxOptions
	log    *slog.Logger
	limits map[AdapterName]Limits

	mu       sync.Mutex
	pending  []*entry
	byKey    map[string]*entry // pending (not running) entries by Key
	running  map[string]bool   // places with an op in flight
	lastRun  map[string]time.Time
	buckets  map[string]*rate.Limiter
	paused   map[string]time.Time // group or global key → resume time
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
	op        Op
	seq       uint64
	notBefore time.Time
	attempts  int
}

// NewOutbox returns an outbox pacing the given adapters' limits.
func NewOutbox(opts OutboxOptions, adapters ...Adapter) *Outbox {
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 8
	}
	if opts.MaxAttempts <= 0 {
		opts.MaxAttempts = 5
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	o := &Outbox{
		opts:    opts,
		log:     opts.Logger,
		limits:  map[AdapterName]Limits{},
		byKey:   map[string]*entry{},
		running: map[string]bool{},
		lastRun: map[string]time.Time{},
		buckets: map[string]*rate.Limiter{},
		paused:  map[string]time.Time{},
		wake:    make(chan struct{}, 1),
		runCtx:  ctx,
		stop:    stop,
		stats: OutboxStats{
			Ops:         map[AdapterName]map[OpKind]uint64{},
			RateLimited: map[AdapterName]map[OpKind]uint64{},
			Failed:      map[AdapterName]uint64{},
		},
	}
	o.idle = sync.NewCond(&o.mu)
	for _, a := range adapters {
		o.limits[a.Name()] = a.Capabilities().Limits
	}
	o.wg.Add(1)
	go o.loop()
	return o
}

// Enqueue adds op, replacing a pending op with the same Key. It never
// blocks on the platform.
func (o *Outbox) Enqueue(op Op) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		if op.Done != nil {
			go op.Done(errors.New("outbox: closed"))
		}
		return
	}
	if op.Key != "" {
		if e, ok := o.byKey[op.Key]; ok {
			e.op = op
			e.attempts = 0
			o.signal()
			return
		}
	}
	o.seq++
	e := &entry{op: op, seq: o.seq}
	if op.Kind == OpEdit && op.Key != "" && o.opts.EditInterval > 0 {
		if last, ok := o.lastRun[op.Key]; ok {
			e.notBefore = last.Add(o.opts.EditInterval)
		}
	}
	o.pending = append(o.pending, e)
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

func placeKey(a AdapterName, p Place) string { return string(a) + "\x00" + p.Chat + "\x00" + p.Thread }
func groupKey(a AdapterName, p Place) string { return string(a) + "\x00" + p.Chat }

// bucketsFor returns the limiters that pace op (creating them lazily).
func (o *Outbox) bucketsFor(op Op) []*rate.Limiter {
	l := o.limits[op.Adapter]
	var out []*rate.Limiter
	add := func(key string, r Rate) {
		if !r.Unlimited() {
			out = append(out, o.bucket(key, r))
		}
	}
	if !op.Place.IsZero() {
		add("c\x00"+placeKey(op.Adapter, op.Place), l.PerChat)
		add("g\x00"+groupKey(op.Adapter, op.Place), l.PerGroup)
	}
	add("a\x00"+string(op.Adapter), l.Global)
	return out
}

func (o *Outbox) bucket(key string, r Rate) *rate.Limiter {
	b, ok := o.buckets[key]
	if !ok {
		b = rate.NewLimiter(rate.Limit(float64(r.N)/r.Per.Seconds()), max(r.Burst, 1))
		o.buckets[key] = b
	}
	return b
}

// readyAt is the earliest time e may run (now or earlier when it may run now).
func (o *Outbox) readyAt(e *entry, now time.Time) time.Time {
	t := e.notBefore
	for _, k := range []string{groupKey(e.op.Adapter, e.op.Place), string(e.op.Adapter)} {
		if p, ok := o.paused[k]; ok && p.After(t) {
			t = p
		}
	}
	for _, b := range o.bucketsFor(e.op) {
		if tok := b.TokensAt(now); tok < 1 {
			wait := time.Duration((1 - tok) / float64(b.Limit()) * float64(time.Second))
			if w := now.Add(wait); w.After(t) {
				t = w
			}
		}
	}
	return t
}

func (o *Outbox) loop() {
	defer o.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return
		}
		next := o.dispatchLocked()
		o.mu.Unlock()
		wait := time.Hour
		if !next.IsZero() {
			wait = max(time.Until(next), time.Millisecond)
		}
		timer.Reset(wait)
		select {
		case <-o.wake:
		case <-timer.C:
		case <-o.runCtx.Done():
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// dispatchLocked starts every op that may run now and returns when the next
// blocked one may run (zero when none is waiting on time).
func (o *Outbox) dispatchLocked() time.Time {
	for {
		now := time.Now()
		var best *entry
		bestIdx := -1
		var next time.Time
		if o.inflight >= o.opts.MaxInFlight {
			return time.Time{}
		}
		for i, e := range o.pending {
			if o.running[placeKey(e.op.Adapter, e.op.Place)] {
				continue // woken when that place's op finishes
			}
			if at := o.readyAt(e, now); at.After(now) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			if best == nil || e.op.Kind < best.op.Kind || (e.op.Kind == best.op.Kind && e.seq < best.seq) {
				best, bestIdx = e, i
			}
		}
		if best == nil {
			return next
		}
		for _, b := range o.bucketsFor(best.op) {
			b.AllowN(now, 1)
		}
		o.pending = append(o.pending[:bestIdx], o.pending[bestIdx+1:]...)
		if best.op.Key != "" && o.byKey[best.op.Key] == best {
			delete(o.byKey, best.op.Key)
		}
		if best.op.Key != "" {
			o.lastRun[best.op.Key] = now
		}
		pk := placeKey(best.op.Adapter, best.op.Place)
		o.running[pk] = true
		o.inflight++
		o.wg.Add(1)
		go o.run(best, pk)
	}
}

func (o *Outbox) run(e *entry, pk string) {
	defer o.wg.Done()
	err := e.op.Run(o.runCtx, e.op.Place)
	if errors.Is(err, ErrNotModified) {
		err = nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.running, pk)
	o.inflight--
	defer o.signal()
	defer o.idle.Broadcast()
	a := e.op.Adapter
	var moved *MovedError
	if !errors.As(err, &moved) {
		if o.stats.Ops[a] == nil {
			o.stats.Ops[a] = map[OpKind]uint64{}
		}
		o.stats.Ops[a][e.op.Kind]++
	}
	if err == nil {
		o.finish(e, nil)
		return
	}
	var rl *RateLimitError
	switch {
	case errors.As(err, &moved):
		e.op.Place = moved.Place
		o.requeueLocked(e, e.notBefore)
		return
	case errors.As(err, &rl):
		if o.stats.RateLimited[a] == nil {
			o.stats.RateLimited[a] = map[OpKind]uint64{}
		}
		o.stats.RateLimited[a][e.op.Kind]++
		key := string(a)
		if !e.op.Place.IsZero() {
			key = groupKey(a, e.op.Place)
		}
		until := time.Now().Add(rl.RetryAfter)
		if until.After(o.paused[key]) {
			o.paused[key] = until
		}
		o.log.Warn("platform rate limit", "adapter", a, "op", e.op.Kind, "retry_after", rl.RetryAfter)
		o.requeueLocked(e, time.Time{})
	case o.closed || o.runCtx.Err() != nil:
		o.finish(e, err)
	case IsPermanent(err):
		o.stats.Failed[a]++
		o.log.Error("platform operation failed", "adapter", a, "op", e.op.Kind, "err", err)
		o.finish(e, err)
	default:
		e.attempts++
		if !e.op.Final && e.attempts >= o.opts.MaxAttempts {
			o.stats.Failed[a]++
			o.log.Error("platform operation failed, giving up", "adapter", a, "op", e.op.Kind, "attempts", e.attempts, "err", err)
			o.finish(e, err)
			return
		}
		backoff := min(time.Second<<min(e.attempts-1, 5), 30*time.Second)
		o.log.Warn("platform operation failed, retrying", "adapter", a, "op", e.op.Kind, "in", backoff, "err", err)
		o.requeueLocked(e, time.Now().Add(backoff))
	}
}

// requeueLocked puts a failed op back in its old position, unless a newer
// op with the same key arrived meanwhile: that one carries newer content.
func (o *Outbox) requeueLocked(e *entry, notBefore time.Time) {
	if e.op.Key != "" {
		if _, newer := o.byKey[e.op.Key]; newer {
			return
		}
		o.byKey[e.op.Key] = e
	}
	e.notBefore = notBefore
	o.pending = append(o.pending, e)
}

func (o *Outbox) finish(e *entry, err error) {
	if e.op.Done != nil {
		go e.op.Done(err)
	}
}

// MovedError is returned by an Op's Run, before it made any platform call
// for its content, when the op turns out to land at another Place than it
// was queued for (the session was bound meanwhile). The outbox queues the op
// again at Place, keeping its turn, so it is paced by that place's limits.
type MovedError struct{ Place Place }

func (e *MovedError) Error() string { return "operation moved to another place" }

// Drain waits until no op is pending or in flight, or ctx ends.
func (o *Outbox) Drain(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		o.mu.Lock()
		o.idle.Broadcast()
		o.mu.Unlock()
	})
	defer stop()
	o.mu.Lock()
	defer o.mu.Unlock()
	for len(o.pending) > 0 || o.inflight > 0 {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		o.idle.Wait()
	}
	return nil
}

// Close stops the outbox: pending ops are dropped and in-flight calls are
// cancelled. Call Drain first for a graceful stop.
func (o *Outbox) Close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.stop()
	o.signal()
	o.wg.Wait()
}

// Stats returns a snapshot of the counters.
func (o *Outbox) Stats() OutboxStats {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := OutboxStats{
		Pending:     len(o.pending),
		InFlight:    o.inflight,
		Ops:         map[AdapterName]map[OpKind]uint64{},
		RateLimited: map[AdapterName]map[OpKind]uint64{},
		Failed:      map[AdapterName]uint64{},
	}
	for a, m := range o.stats.Ops {
		s.Ops[a] = maps.Clone(m)
	}
	for a, m := range o.stats.RateLimited {
		s.RateLimited[a] = maps.Clone(m)
	}
	for a, v := range o.stats.Failed {
		s.Failed[a] = v
	}
	return s
}
