package delivery

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// Claims share the journal's delivery among instances (ClaimOptions). Every
// instance sees every journaled event (its own on its bus, the others'
// from the event log); each one claims an event in the store before it
// enqueues the event's operations, and the store grants each claim to one
// of them. A claim expires by the store's clock unless renewed, so the
// holder renews the claims of the events it is still delivering every
// ClaimOptions.Renew, and stops sending on its own clock before the store
// could give them to another: an operation whose claim was last confirmed
// more than TTL − TTL/5 ago, or which the store said was taken over, is not
// sent (errClaimLost) and not confirmed, and a platform call still running
// when the claim could expire is cancelled. What a dead instance held is taken
// over by the others' periodic scan (ClaimOptions.Scan), which claims the
// journaled events nobody holds any more and delivers them, skipping the
// operations confirmed before; so is what a stopping instance releases
// (Dispatcher.ReleaseClaims). Claims decide who sends, not what counts as
// sent: a confirmation is recorded whoever makes it.
//
// The repeat window is the journal's, unchanged by sharing: an operation
// is sent twice only when its sender dies (or is cut off from the store)
// after the platform accepted it and before its confirmation committed —
// one store write, OnConfirmed measures it — and the instance that takes
// the event over sends it again. The key is the same whichever instance
// sends it (the event's seq and the operation's key, OutMessage.Key), so on
// Matrix, whose homeserver takes a repeated transaction id from the same
// access token as the first, it is shown once; Telegram and Slack take no
// idempotency key and show it twice. An instance cut off from the store
// adds nothing to the window: it starts no operation after TTL − TTL/5 on
// its own clock and cancels a call still running when the claim could
// expire, so its sends cannot overlap the next holder's; what the platform
// took before the cancel and was never confirmed is the same window.

// DefaultClaimTTL is ClaimOptions.TTL when zero: a dead instance's
// deliveries are taken over within TTL + Scan (8 s by the defaults), as
// quickly as a platform's single consumer is by its lease (core.LeaseTTL),
// and within the 10 s an operator is promised. A renewal every 2 s is one
// statement for all the claims an instance holds.
const DefaultClaimTTL = 6 * time.Second

// ClaimOptions share the delivery of the journal with other instances of
// the same store. The zero value shares nothing: every journaled event is
// this instance's, as with one instance on a bbolt file.
type ClaimOptions struct {
	// Store grants the claims; nil disables claiming.
	Store core.DeliveryClaimer
	// Instance names this process, unique among the instances; empty
	// means a random name, made once.
	Instance core.InstanceID
	// TTL is how long a claim lasts, by the store's clock, when not
	// renewed; zero means DefaultClaimTTL.
	TTL time.Duration
	// Renew is how often the claims held are renewed; zero means TTL/3.
	Renew time.Duration
	// Scan is how often to look for deliveries nobody holds; zero means
	// TTL/3.
	Scan time.Duration
	// Shared says other instances may run adapters this one does not
	// (several instances on PostgreSQL): an event meant for one of them
	// is handed over once this instance served its own (handoff.go)
	// rather than broadcast to the adapters it has. False: this instance
	// runs every adapter there is (bbolt).
	Shared bool
	// Seen, when set, is the last event seq the cluster feed published
	// (the follower's position): the scan looks that far, so that it
	// finds events other instances committed and handed over. Nil: as far
	// as this dispatcher has seen (its own commits). The feed may be
	// ahead of this dispatcher's own commits: a scan may serve one of them
	// before Run reaches it, so with Shared a dispatch from the bus reads
	// the event's confirmed keys from the store rather than take them to
	// be none.
	Seen func() uint64
}

// errClaimLost ends an operation its instance may no longer send: another
// instance took the event over, or may have (the claim went unrenewed
// for too long). It is permanent for the outbox and never confirmed.
var errClaimLost = core.Permanent(errors.New("delivery: the claim on the journaled event was lost; another instance delivers it"))

// lostClaim reports whether err ended an operation because its claim was
// lost: nothing was sent, nothing is confirmed or reported.
func lostClaim(err error) bool { return err != nil && errors.Is(err, errClaimLost) }

// claims holds this instance's claims and how long it may act on each.
type claims struct {
	opts ClaimOptions
	log  *slog.Logger

	mu sync.Mutex
	// inert are the journaled events a scan dispatched that gave this
	// dispatcher nothing to deliver and stayed journaled (no session,
	// no place): later scans pass them over, as Replay leaves them for the
	// next start. Only the scan's goroutine uses it.
	inert map[uint64]bool
	// passed are the events this instance handed over (handoff.go):
	// its scans pass them over. Guarded by mu.
	passed map[uint64]bool
	// granted is, per claimed seq, when the request that last granted or
	// renewed it was sent: by this instance's clock, before the store's
	// clock took the time the claim expires from, so the claim expires
	// no sooner than granted + TTL (clocks running at the same rate).
	granted map[uint64]time.Time
}

func newClaims(opts ClaimOptions, log *slog.Logger) *claims {
	if opts.Store == nil {
		return nil
	}
	if opts.Instance == "" {
		// Claimants sharing a name would renew and take each other's
		// claims as their own.
		opts.Instance = core.InstanceID("instance-" + rand.Text())
	}
	if opts.TTL <= 0 {
		opts.TTL = DefaultClaimTTL
	}
	if opts.Renew <= 0 {
		opts.Renew = opts.TTL / 3
	}
	if opts.Scan <= 0 {
		opts.Scan = opts.TTL / 3
	}
	return &claims{opts: opts, log: log, granted: map[uint64]time.Time{}, inert: map[uint64]bool{}, passed: map[uint64]bool{}}
}

// shared reports whether events may be handed over to instances running
// other adapters (ClaimOptions.Shared).
func (c *claims) shared() bool { return c != nil && c.opts.Shared }

// passOver records that this instance handed seq over.
func (c *claims) passOver(seq uint64) {
	c.mu.Lock()
	c.passed[seq] = true
	c.mu.Unlock()
}

// passedOver reports whether this instance handed seq over.
func (c *claims) passedOver(seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.passed[seq]
}

// margin is how long before a claim's expiry its holder stops acting on
// it: room for clock drift and a request in flight.
func (c *claims) margin() time.Duration { return c.opts.TTL / 5 }

// grant records that the request sent at sent granted or renewed seqs.
func (c *claims) grant(sent time.Time, seqs ...uint64) {
	c.mu.Lock()
	for _, s := range seqs {
		c.granted[s] = sent
	}
	c.mu.Unlock()
}

// claim asks the store for seq; false when another instance holds it, it
// is finished, or the store did not answer (the scan retries it then).
func (c *claims) claim(ctx context.Context, seq uint64) bool {
	if c == nil {
		return true
	}
	sent := time.Now()
	ok, err := c.opts.Store.ClaimDelivery(ctx, seq, c.opts.Instance, c.opts.TTL)
	if err != nil {
		c.log.Warn("journal: claim delivery; left to the scan", "seq", seq, "err", err)
		return false
	}
	if ok {
		c.grant(sent, seq)
	}
	return ok
}

// claimPage claims the free journaled events in (after, upTo].
func (c *claims) claimPage(ctx context.Context, after, upTo uint64, limit int) ([]core.Delivery, error) {
	sent := time.Now()
	page, err := c.opts.Store.ClaimDeliveries(ctx, after, upTo, limit, c.opts.Instance, c.opts.TTL)
	if err != nil {
		return nil, err
	}
	for _, dl := range page {
		c.grant(sent, dl.Event.Seq)
	}
	return page, nil
}

// window is, by this instance's clock, until when it may start an
// operation of seq (TTL − margin after the last grant) and the earliest
// time the store could give the claim to another (TTL after it); ok is
// false when it holds no claim on seq.
func (c *claims) window(seq uint64) (until, expires time.Time, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.granted[seq]
	return g.Add(c.opts.TTL - c.margin()), g.Add(c.opts.TTL), ok
}

// hold returns a context that ends with ctx or when the claim on seq could
// expire (first at expires, later as renewals move it), for a platform
// call that must not outlast the claim.
func (c *claims) hold(ctx context.Context, seq uint64, expires time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			t := time.NewTimer(time.Until(expires))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			var ok bool
			if _, expires, ok = c.window(seq); !ok || !time.Now().Before(expires) {
				cancel()
				return
			}
		}
	}()
	return ctx, cancel
}

// renew extends the claims on seqs (the events being delivered) and
// returns the seqs another instance took over meanwhile. Claims not among
// seqs are forgotten.
func (c *claims) renew(ctx context.Context, seqs []uint64) (lost []uint64, err error) {
	c.mu.Lock()
	keep := make(map[uint64]time.Time, len(seqs))
	for _, s := range seqs {
		if g, ok := c.granted[s]; ok {
			keep[s] = g
		}
	}
	c.granted = keep
	c.mu.Unlock()
	if len(seqs) == 0 {
		return nil, nil
	}
	sent := time.Now()
	held, err := c.opts.Store.RenewClaims(ctx, c.opts.Instance, seqs, c.opts.TTL)
	if err != nil {
		return nil, fmt.Errorf("journal: renew claims: %w", err)
	}
	c.grant(sent, held...)
	still := make(map[uint64]bool, len(held))
	for _, s := range held {
		still[s] = true
	}
	c.mu.Lock()
	for _, s := range seqs {
		if !still[s] {
			lost = append(lost, s)
			delete(c.granted, s)
		}
	}
	c.mu.Unlock()
	return lost, nil
}

// RunClaims renews this instance's claims every ClaimOptions.Renew and
// every ClaimOptions.Scan takes over the journaled events nobody holds any
// more (their instance died, or stopped and released them), until ctx
// ends. Without claims it returns at once. The scan looks only at events
// this dispatcher has already seen (Replay's upTo, then Run's Seen), so
// an event just journaled is left to its own instance's live dispatch;
// with ClaimOptions.Seen it looks as far as the cluster feed, which may be
// ahead of that dispatch, and the dispatch then reads what the scan (or
// another instance's) confirmed before sending (Dispatcher.track).
func (d *Dispatcher) RunClaims(ctx context.Context) {
	c := d.journal.claims
	if c == nil {
		return
	}
	renew := time.NewTicker(c.opts.Renew)
	defer renew.Stop()
	scan := time.NewTicker(c.opts.Scan)
	defer scan.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			lost, err := c.renew(ctx, d.journal.claimed())
			if err != nil && ctx.Err() == nil {
				d.log.Warn("journal: claims not renewed", "err", err)
			}
			if len(lost) > 0 {
				d.log.Info("journal: deliveries taken over by another instance", "events", len(lost))
				d.journal.lose(lost)
			}
		case <-scan.C:
			n, err := d.takeOver(ctx)
			if err != nil && ctx.Err() == nil {
				d.log.Warn("journal: scan for abandoned deliveries", "err", err)
			}
			if n > 0 {
				d.log.Info("journal: taking over undelivered messages", "events", n)
			}
		}
	}
}

// takeOver claims and dispatches the journaled events up to what this
// dispatcher has seen (or the cluster feed published, ClaimOptions.Seen)
// that no instance holds and this one is not delivering; it returns how
// many. The claims it took on events it passes over (inert here, or
// handed over by this instance) are released at once, so that an instance
// that can deliver them is not kept waiting for their expiry.
func (d *Dispatcher) takeOver(ctx context.Context) (int, error) {
	c := d.journal.claims
	upTo := max(d.seen.Load(), d.replayed.Load())
	if c.opts.Seen != nil {
		upTo = max(upTo, c.opts.Seen())
	}
	if upTo == 0 {
		return 0, nil
	}
	d.journal.beginScan()
	defer d.journal.endScan()
	before := c.passedSeqs()
	journaled := map[uint64]bool{}
	var after uint64
	n := 0
	for {
		page, err := c.claimPage(ctx, after, upTo, replayPage)
		if err != nil {
			return n, fmt.Errorf("dispatch: take over: %w", err)
		}
		var skipped []uint64
		for _, dl := range page {
			seq := dl.Event.Seq
			journaled[seq] = true
			if d.journal.busy(seq) {
				continue
			}
			if c.inert[seq] || c.passedOver(seq) {
				skipped = append(skipped, seq)
				continue
			}
			if err := d.dispatch(ctx, dl.Event, dl.Done, true); err != nil {
				d.log.Warn("take over", "seq", seq, "session", dl.Event.Session, "err", err)
				continue
			}
			if !d.journal.busy(seq) && !d.journal.finishedInScan(seq) {
				c.inert[seq] = true
				continue
			}
			n++
		}
		if len(skipped) > 0 {
			if err := c.opts.Store.ReleaseClaims(ctx, c.opts.Instance, skipped); err != nil {
				d.log.Warn("journal: release the events passed over; they are free when their claims expire", "err", err)
			}
		}
		if len(page) < replayPage {
			c.forgetFinished(before, journaled)
			return n, nil
		}
		after = page[len(page)-1].Event.Seq
	}
}

// passedSeqs returns the events handed over so far, for forgetFinished.
func (c *claims) passedSeqs() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]uint64, 0, len(c.passed))
	for s := range c.passed {
		out = append(out, s)
	}
	return out
}

// forgetFinished forgets the inert events, and those of the events handed
// over before a whole scan began, that the scan did not find journaled:
// they left the journal, and the maps stay as small as it. One another
// instance held during the scan is forgotten too; should it come back,
// dispatching it again serves nothing twice (its confirmed keys and
// markers are skipped) and passes it over again.
func (c *claims) forgetFinished(passed []uint64, journaled map[uint64]bool) {
	for seq := range c.inert {
		if !journaled[seq] {
			delete(c.inert, seq)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, seq := range passed {
		if !journaled[seq] {
			delete(c.passed, seq)
		}
	}
}

// ReleaseClaims gives up the claims of the events this instance did not
// finish delivering, so that another instance takes them over at its next
// scan rather than at their expiry. The daemon calls it at a clean stop,
// after the outbox closed (nothing of theirs is sent any more).
func (d *Dispatcher) ReleaseClaims(ctx context.Context) error {
	c := d.journal.claims
	if c == nil {
		return nil
	}
	seqs := d.journal.claimed()
	if err := c.opts.Store.ReleaseClaims(ctx, c.opts.Instance, seqs); err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	d.journal.lose(seqs)
	return nil
}
