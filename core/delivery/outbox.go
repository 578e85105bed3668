package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
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
// ask for with TakeMethod, in the same windows (methods.go).
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
	// last run before it, restored when the run made no call.
	startedAt, prevRun time.Time
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

// editAfter is when an edit may run given the last run of its Key.
func (o *Outbox) editAfter(op core.Op) time.Time {
	if op.Kind != core.OpEdit || op.Key == "" {
		return time.Time{}
	}
	last, ok := o.lastRun[op.Key]
	if !ok {
		return time.Time{}
	}
	return o.learnedEditAfter(op, last)
}

func (o *Outbox) editInterval(a core.AdapterName) time.Duration {
	if d := o.caps[a].EditInterval; d > 0 {
		return d
	}
	return o.opts.EditInterval
}

func (o *Outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func placeKey(a core.AdapterName, p core.Place) string {
	return string(a) + "\x00" + p.Chat + "\x00" + p.Thread
}

// scopeKey names the scope s of an op of adapter a at p. A conversation or
// group scope of the zero Place (a session not bound yet) is the account:
// that is the only budget such an op is known to spend.
func scopeKey(a core.AdapterName, s core.Scope, p core.Place) string {
	switch {
	case p.IsZero() || s == core.ScopeAccount:
		return "a\x00" + string(a)
	case s == core.ScopeConversation:
		return "c\x00" + placeKey(a, p)
	default:
		return "g\x00" + string(a) + "\x00" + p.Chat
	}
}

// scopesOf are the scope keys an op belongs to, for pauses.
func scopesOf(op core.Op) [3]string {
	return [3]string{
		scopeKey(op.Adapter, core.ScopeConversation, op.Place),
		scopeKey(op.Adapter, core.ScopeGroup, op.Place),
		scopeKey(op.Adapter, core.ScopeAccount, op.Place),
	}
}

// windowsFor returns the sliding windows that count op (created lazily).
func (o *Outbox) windowsFor(op core.Op) []*window {
	var out []*window
	for i, l := range o.caps[op.Adapter].Limits {
		if l.Rate.Unlimited() || !counts(op, l) {
			continue
		}
		if op.Place.IsZero() && l.Scope != core.ScopeAccount {
			continue // no conversation yet: its budgets are not spent
		}
		key := windowKey(op.Adapter, l.Scope, op.Place, i)
		w, ok := o.windows[key]
		if !ok {
			w = &window{rate: l.Rate, kept: l.SendShare}
			o.windows[key] = w
		}
		o.learnedWindow(w, key, l)
		out = append(out, w)
	}
	return out
}

// competitors is how many conversations of op's group compete for a
// budget renewed every per: those with work waiting now, and those served
// within the last two such periods — sessions that were busy a minute ago
// are likely to stream again, and they start one after another, so
// counting only the waiting ones would let the first arrivals burn the
// budget.
func (o *Outbox) competitors(op core.Op, waiting map[string]bool, now time.Time, per time.Duration) int {
	n := len(waiting)
	for p, at := range o.recent[scopeKey(op.Adapter, core.ScopeGroup, op.Place)] {
		if !waiting[p] && now.Sub(at) < 2*per {
			n++
		}
	}
	return n
}

// counts reports whether limit l counts op: whether it applies to a kind
// of call op makes.
func counts(op core.Op, l core.Limit) bool {
	if op.Calls == nil {
		return l.Applies(op.Kind)
	}
	for _, k := range op.Calls {
		if l.Applies(k) {
			return true
		}
	}
	return false
}

// readyAt is the earliest time e may run (now or earlier when it may run
// now). waiting returns the conversations of e's group with work queued or
// in flight, e's own included; it is called only for a contended edit.
//
// A budget shared by a group (Telegram's 20 a minute) is spent in a burst
// while it lasts: a lone stream shows its newest text every second, and
// five final texts go out at once when the budget has room for them. But
// an edit — whose text a later edit replaces anyway — may not take one of
// the budget's last slots, one for each conversation competing for it
// (see competitors): those are kept so that every
// conversation can still show its newest text soon, and edits are spread
// at the budget's steady rate (a minute / 20: every 3 s) instead of
// burning the whole minute in its first seconds on text that is stale a
// second later. New messages are never held back this way: each one is
// wanted.
func (o *Outbox) readyAt(e *entry, now time.Time, waiting func() map[string]bool) time.Time {
	t := e.notBefore
	if u := o.expectedUntil(e.op); u.After(t) {
		t = u
	}
	if len(o.paused) > 0 {
		for _, k := range scopesOf(e.op) {
			for _, k := range [2]string{k, kindPauseKey(k, e.op.Kind)} {
				if p, ok := o.paused[k]; ok && p.After(t) {
					t = p
				}
			}
		}
	}
	for _, w := range o.windowsFor(e.op) {
		at := o.windowReadyAt(e.op.Adapter, w, now, shareKind(e.op))
		if e.op.Kind == core.OpEdit && !slices.Contains(e.op.Calls, core.OpSend) && w.rate.N > 1 && len(w.takes) > 0 {
			if n := o.competitors(e.op, waiting(), now, w.rate.Per); n > 1 && len(w.takes) >= w.rate.N-n {
				if even := w.last().Add(w.rate.Per / time.Duration(w.rate.N)); even.After(at) {
					at = even
				}
			}
		}
		if at.After(t) {
			t = at
		}
	}
	return t
}

// groupsBusy lists, per group, the conversations with an op pending or in
// flight, for readyAt's competitors.
func (o *Outbox) groupsBusy() map[string]map[string]bool {
	busy := map[string]map[string]bool{}
	mark := func(a core.AdapterName, p core.Place) {
		g := scopeKey(a, core.ScopeGroup, p)
		if busy[g] == nil {
			busy[g] = map[string]bool{}
		}
		busy[g][placeKey(a, p)] = true
	}
	for _, e := range o.pending {
		mark(e.op.Adapter, e.op.Place)
	}
	for _, e := range o.running {
		mark(e.op.Adapter, e.op.Place)
	}
	return busy
}

// pruneEvery is how often idle pacing state is dropped, so that memory does
// not grow with the number of conversations ever served.
const pruneEvery = time.Minute

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
//
// Its decisions are those of a full scan of the queue for each op started
// (the best op that may run now, by candidate.compare, then again), made
// with fewer scans: a dispatch that starts k ops scans the queue once or
// twice rather than k+1 times, and removes them from it in one pass.
// Starting an op only takes room in its windows and puts its place in
// flight: no other op becomes ready by it, and the order of the rest does
// not change (lastServed changes only for the started op's place, whose
// ops now wait for it). So one scan collects the ops ready now, sorted, and
// they are started in that order, each checked again first. What a full
// scan would still change is rechecked: ops with an Expires are dropped
// once their ready time passes it, and after any op was dropped so, the
// groups' competitors (groupsBusy) are counted again, by a new scan.
// Learned budgets (learn.go) grow as ops take and wait for them, which can
// make ready an op that was not: an outbox pacing any learned limit scans
// again after every op it started, as before.
func (o *Outbox) dispatchLocked() time.Time {
	now := time.Now()
	if now.After(o.pruneAt) {
		o.pruneLocked(now)
		o.pruneAt = now.Add(pruneEvery)
	}
	defer o.compactLocked()
	for {
		if o.inflight >= o.opts.MaxInFlight {
			return time.Time{}
		}
		o.compactLocked()
		var busy map[string]map[string]bool // made when first needed
		waiting := func(e *entry) func() map[string]bool {
			return func() map[string]bool {
				if busy == nil {
					busy = o.groupsBusy()
				}
				return busy[scopeKey(e.op.Adapter, core.ScopeGroup, e.op.Place)]
			}
		}
		var next time.Time
		var ready []candidate
		var expiring []*entry
		dropped := false
		for _, e := range o.pending {
			pk := placeKey(e.op.Adapter, e.op.Place)
			if o.running[pk] != nil {
				continue // woken when that place's op finishes
			}
			at := o.readyAt(e, now, waiting(e))
			if !e.op.Expires.IsZero() && at.After(e.op.Expires) {
				o.expireLocked(e)
				dropped = true
				continue
			}
			if !e.op.Expires.IsZero() {
				expiring = append(expiring, e)
			}
			if o.held[e.op.Adapter] {
				continue // woken by Hold's release
			}
			if at.After(now) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			ready = append(ready, candidate{e: e, pk: pk, served: o.lastServed(e.op, pk)})
		}
		if len(ready) == 0 {
			o.idle.Broadcast()
			return next
		}
		slices.SortStableFunc(ready, candidate.compare)
		o.startLocked(ready[0].e, now)
		if dropped || o.learns {
			continue // a full scan, as after every start
		}
		for _, c := range ready[1:] {
			if o.inflight >= o.opts.MaxInFlight {
				return time.Time{}
			}
			// What the full scan would drop now that windows have less
			// room.
			for _, x := range expiring {
				if x.dequeued || o.running[placeKey(x.op.Adapter, x.op.Place)] != nil {
					continue
				}
				if o.readyAt(x, now, waiting(x)).After(x.op.Expires) {
					o.expireLocked(x)
					dropped = true
				}
			}
			e := c.e
			if e.dequeued || o.running[c.pk] != nil || o.readyAt(e, now, waiting(e)).After(now) {
				continue // and stays so until this dispatch ends
			}
			o.startLocked(e, now)
			if dropped {
				break
			}
		}
	}
}

// candidate is an op that may run now, with what orders it and its place
// key.
type candidate struct {
	e      *entry
	pk     string
	served time.Time // lastServed
}

// compare orders two ops that may both run now: the better priority
// first; between equal priorities, the op whose conversation was served
// least recently (see lastServed), then the earlier enqueue. Conversations
// sharing a budget (a Telegram supergroup's one message a second) so take
// turns rather than going first come, first served: a session with ten
// continuation messages queued does not hold another session's answer
// back for ten seconds. One conversation's ops keep their order, since
// they share their last service.
//
// Among ops at send priority, one that posts a new message goes before one
// that only edits (a turn's final output is queued at send priority, see
// Dispatcher.enqueueOutput): an answer for people (a command's reply, a
// question, an approval) never waits behind other sessions' final texts
// when a budget lets out one message at a time.
func (c candidate) compare(d candidate) int {
	if c.e.op.Kind != d.e.op.Kind {
		return cmp.Compare(c.e.op.Kind, d.e.op.Kind)
	}
	if pc, pd := posts(c.e.op), posts(d.e.op); pc != pd {
		if pc {
			return -1
		}
		return 1
	}
	if n := c.served.Compare(d.served); n != 0 {
		return n
	}
	return cmp.Compare(c.e.seq, d.e.seq)
}

// posts reports whether op makes a new message: its Kind is a send and
// its Calls (when set) include one.
func posts(op core.Op) bool {
	if op.Kind != core.OpSend {
		return false
	}
	return op.Calls == nil || slices.Contains(op.Calls, core.OpSend)
}

// shareKind is the kind op counts as for the share of a budget kept for new
// messages (Limit.SendShare): a send when it posts one, an edit otherwise —
// a final output edit at send priority included, so that it does not take
// the slots kept for people's answers.
func shareKind(op core.Op) core.OpKind {
	if op.Kind == core.OpSend && !posts(op) {
		return core.OpEdit
	}
	return op.Kind
}

// startLocked takes e out of the queue and runs it.
func (o *Outbox) startLocked(e *entry, now time.Time) {
	o.metLocked(e.op)
	for _, w := range o.windowsFor(e.op) {
		w.take(now)
		o.tookLocked(e.op.Adapter, w, now)
	}
	o.markRecent(e.op, now)
	o.dequeueLocked(e)
	e.startedAt = now
	if e.op.Key != "" {
		e.prevRun = o.lastRun[e.op.Key]
		o.lastRun[e.op.Key] = now
	}
	pk := placeKey(e.op.Adapter, e.op.Place)
	o.running[pk] = e
	o.inflight++
	o.wg.Add(1)
	go o.run(e, pk)
}

// expireLocked drops e, which can no longer start before it expires.
func (o *Outbox) expireLocked(e *entry) {
	o.dequeueLocked(e)
	o.finishLocked(e.op, core.ErrExpired)
}

// lastServed is when op's conversation last had an op started (zero when
// not within the last two periods of its group's longest limit, or never).
// pk is op's placeKey.
func (o *Outbox) lastServed(op core.Op, pk string) time.Time {
	if op.Place.IsZero() {
		return time.Time{}
	}
	return o.recent[scopeKey(op.Adapter, core.ScopeGroup, op.Place)][pk]
}

// dequeueLocked takes e out of the queue: at once for everything but the
// pending slice, from which compactLocked removes it (one pass for all the
// ops a dispatch starts, rather than a copy of the queue for each).
func (o *Outbox) dequeueLocked(e *entry) {
	e.dequeued = true
	o.dequeued++
	o.popLocked(e)
	if e.op.Key != "" && o.byKey[e.op.Key] == e {
		delete(o.byKey, e.op.Key)
	}
}

// compactLocked removes the dequeued entries from the pending slice, in
// order; dispatchLocked calls it before it lets go of the lock, so nothing
// else sees them.
func (o *Outbox) compactLocked() {
	if o.dequeued == 0 {
		return
	}
	kept := o.pending[:0]
	for _, e := range o.pending {
		if e.dequeued {
			e.dequeued = false
			continue
		}
		kept = append(kept, e)
	}
	clear(o.pending[len(kept):])
	o.pending = kept
	o.dequeued = 0
}

// markRecent remembers that op's conversation ran an op at now.
func (o *Outbox) markRecent(op core.Op, now time.Time) {
	if op.Place.IsZero() {
		return
	}
	g := scopeKey(op.Adapter, core.ScopeGroup, op.Place)
	if o.recent[g] == nil {
		o.recent[g] = map[string]time.Time{}
	}
	o.recent[g][placeKey(op.Adapter, op.Place)] = now
}

// pruneLocked drops pacing state nothing needs any more: windows that count
// nothing, pauses that ended, and edit times older than any edit interval.
func (o *Outbox) pruneLocked(now time.Time) {
	for k, w := range o.windows {
		if w.idle(now) {
			delete(o.windows, k)
		}
	}
	for k, t := range o.paused {
		if !t.After(now) {
			delete(o.paused, k)
		}
	}
	longest := o.opts.EditInterval
	for _, c := range o.caps {
		longest = max(longest, c.EditInterval)
	}
	longest = max(longest, o.longestLearnedInterval())
	for k, t := range o.lastRun {
		if now.Sub(t) > longest {
			delete(o.lastRun, k)
		}
	}
	var per time.Duration // of the limits on kinds, which competitors serves
	for _, c := range o.caps {
		for _, l := range c.Limits {
			if len(l.Methods) == 0 {
				per = max(per, l.Rate.Per)
			}
		}
	}
	for g, places := range o.recent {
		for p, t := range places {
			if now.Sub(t) >= 2*per {
				delete(places, p)
			}
		}
		if len(places) == 0 {
			delete(o.recent, g)
		}
	}
}

func (o *Outbox) run(e *entry, pk string) {
	defer o.wg.Done()
	timeout := e.op.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout(e.op.Kind)
	}
	ctx, cancel := context.WithTimeout(o.runCtx, timeout)
	err := e.op.Run(ctx, e.op.Place)
	if err != nil && ctx.Err() == context.DeadlineExceeded && o.runCtx.Err() == nil {
		err = fmt.Errorf("no answer within %s: %w", timeout, err)
	}
	cancel()
	if errors.Is(err, core.ErrNotModified) {
		err = nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if errors.Is(err, core.ErrNoCall) {
		o.refundLocked(e)
		err = nil
	}
	delete(o.running, pk)
	o.inflight--
	defer o.signal()
	defer o.idle.Broadcast()
	o.settleLocked(e, err)
}

// settleLocked decides what follows a run that returned err.
func (o *Outbox) settleLocked(e *entry, err error) {
	a := e.op.Adapter
	var moved *MovedError
	if !errors.As(err, &moved) {
		count(o.stats.Ops, a, e.op.Kind)
	}
	var rl *core.RateLimitError
	switch {
	case err == nil:
		o.succeededLocked(a)
		o.finishLocked(e.op, nil)
	case errors.As(err, &moved):
		e.op.Place = moved.Place
		o.requeueLocked(e, e.notBefore)
	case o.closed || o.runCtx.Err() != nil:
		o.finishLocked(e.op, fmt.Errorf("%w: %w", core.ErrOutboxClosed, err))
	case core.IsPermanent(err):
		o.stats.Failed[a]++
		o.log.Error("platform operation failed for good", "adapter", a, "op", e.op.Kind, "err", err)
		o.finishLocked(e.op, err)
	case e.op.BestEffort:
		o.log.Debug("best-effort operation failed", "adapter", a, "op", e.op.Kind, "err", err)
		if errors.As(err, &rl) {
			o.pauseLocked(e.op, rl)
			o.learnFromLimitLocked(e, rl)
		}
		o.finishLocked(e.op, err)
	case errors.As(err, &rl):
		o.pauseLocked(e.op, rl)
		o.learnFromLimitLocked(e, rl)
		o.requeueLocked(e, time.Time{})
	default:
		o.failingLocked(a, e.op.Kind, err)
		e.attempts++
		o.stats.Retries[a]++
		backoff := o.backoff(e.attempts)
		lvl := slog.LevelDebug
		if e.attempts == 1 || backoff == o.opts.MaxBackoff && o.backoff(e.attempts-1) < o.opts.MaxBackoff {
			lvl = slog.LevelWarn
		}
		o.log.Log(context.Background(), lvl, "platform operation failed, retrying", "adapter", a, "op", e.op.Kind,
			"attempt", e.attempts, "in", backoff.Round(time.Millisecond), "err", err)
		o.requeueLocked(e, time.Now().Add(backoff))
	}
}

// refundLocked gives back what a run that made no platform call was
// charged: its place in every window and its Key's last run.
func (o *Outbox) refundLocked(e *entry) {
	for _, w := range o.windowsFor(e.op) {
		w.refund(e.startedAt)
	}
	if e.op.Key != "" && o.lastRun[e.op.Key].Equal(e.startedAt) {
		if e.prevRun.IsZero() {
			delete(o.lastRun, e.op.Key)
		} else {
			o.lastRun[e.op.Key] = e.prevRun
		}
	}
}

// pauseLocked stops everything to the scope rl names until its retry_after
// has elapsed.
func (o *Outbox) pauseLocked(op core.Op, rl *core.RateLimitError) {
	count(o.stats.RateLimited, op.Adapter, op.Kind)
	scope := rl.Scope
	if scope == core.ScopeUnspecified {
		scope = core.ScopeGroup
	}
	key := scopeKey(op.Adapter, scope, op.Place)
	keys := []string{key}
	if len(rl.Kinds) > 0 {
		keys = keys[:0]
		for _, k := range rl.Kinds {
			keys = append(keys, kindPauseKey(key, k))
		}
	}
	until := time.Now().Add(rl.RetryAfter)
	for _, k := range keys {
		if until.After(o.paused[k]) {
			o.paused[k] = until
		}
	}
	o.log.Warn("platform rate limit", "adapter", op.Adapter, "op", op.Kind, "scope", scope, "kinds", rl.Kinds, "retry_after", rl.RetryAfter)
}

// kindPauseKey names a pause of one operation kind within a scope.
func kindPauseKey(scope string, k core.OpKind) string { return scope + "\x00k" + strconv.Itoa(int(k)) }

// backoff is the wait before attempt n+1: MinBackoff·2^(n-1) capped at
// MaxBackoff, less up to a fifth at random so that ops failed by one outage
// do not all come back at the same instant.
func (o *Outbox) backoff(n int) time.Duration {
	d := o.opts.MaxBackoff
	if n < 32 {
		d = min(o.opts.MinBackoff<<(n-1), o.opts.MaxBackoff)
	}
	return d - time.Duration(o.jitter()*float64(d)/5)
}

func count(m map[core.AdapterName]map[core.OpKind]uint64, a core.AdapterName, k core.OpKind) {
	if m[a] == nil {
		m[a] = map[core.OpKind]uint64{}
	}
	m[a][k]++
}

// requeueLocked puts a failed op back in its old position, unless a newer
// op with the same key arrived meanwhile: that one carries newer content.
func (o *Outbox) requeueLocked(e *entry, notBefore time.Time) {
	if e.op.Key != "" {
		if _, newer := o.byKey[e.op.Key]; newer {
			o.finishLocked(e.op, core.ErrSuperseded)
			return
		}
		o.byKey[e.op.Key] = e
	}
	e.notBefore = notBefore
	o.pushLocked(e)
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
