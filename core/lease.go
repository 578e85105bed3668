package core

// Leases with fencing give "whatever must have one consumer" (a Telegram
// long poll per bot token, a Matrix sync per account, a session's agent
// process) to one instance at a time among several sharing a store.
//
// A lease is a row in the store: a name, its holder, a fencing token and an
// expiry judged by the store's clock (the database's, never an instance's).
// Every acquisition that succeeds gets a token larger than any before for
// that name, a renewal keeps it; a write only the holder may make (a cursor
// such as the Telegram offset or the Matrix next_batch) carries the token
// and the store refuses it, in the same statement, once the token is no
// longer current. That covers what the holder cannot know: a write sent
// just before it lost the lease and arriving after.
//
// What cannot be fenced (a getUpdates call, a message sent) is covered by
// time: the holder stops acting on its own monotonic clock before the store
// could give the lease to another. A grant or renewal sent at t lasts until
// at least t+TTL by the store's clock (the statement runs after it was
// sent); the holder gives up at t+TTL-Margin after the send of its last
// successful renewal, so it has stopped a margin before any other instance
// can take over, whatever the network delays.
//
// The timings (LeaseTTL 6 s, renewal every 2 s, waiters trying every 0.5 s,
// margin 1 s) meet the failover goals: after a clean stop the holder frees
// the row and a waiter takes it at its next attempt (≤ 0.5 s); after kill -9
// the row expires at most TTL after the last renewal and a waiter takes it
// within the next attempt (≤ 6.5 s, goal 10 s). A renewal may fail twice in
// a row (a database restart, a dropped connection) before the holder gives
// up; from the first failure it retries every 0.5 s.

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// InstanceID names one running parley process among those sharing a store:
// it holds leases. It is made once per process at start (NewInstanceID) and
// never reused, so a restarted process is another holder.
type InstanceID string

// NewInstanceID returns a fresh id: the host name, the process id and a
// random suffix, so that an operator can tell where a holder runs.
func NewInstanceID() InstanceID {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return InstanceID(fmt.Sprintf("%s-%d-%x", host, os.Getpid(), b))
}

// ErrLeaseLost is returned by a Leaser for a renewal or a fenced write by
// a holder whose lease is no longer current (expired by the store's clock,
// released, or taken by another), and is the cause of a Held's context
// when the holder lost it or gave it up.
var ErrLeaseLost = errors.New("lease lost")

// ErrLeaseConflict is what a holder's work returns (wrapped) to Lead when
// the platform says another consumer is active despite the lease
// (Telegram's 409 to getUpdates): a process outside the cluster, or a
// holder that has not stopped yet. Lead gives the lease up and backs off.
var ErrLeaseConflict = errors.New("another consumer is active")

// Lease is one holding of a named lease, as the store granted it.
type Lease struct {
	Name   string
	Holder InstanceID
	// Token is the fencing token: larger than any earlier holding's of
	// the same name.
	Token int64
	// Expires is when the store will consider the lease free, by the
	// store's clock: for logs and metrics only, never to compare with the
	// instance's own clock.
	Expires time.Time
}

// LeaseInfo describes a lease row, for doctor and metrics.
type LeaseInfo struct {
	Lease
	// Mine says the holder is the store's own instance.
	Mine bool
	// Held says the lease was held when read: it has a holder and had not
	// expired by the store's clock.
	Held bool
}

// Leaser is what a store offers for leases. The store acts for one
// instance (its InstanceID, given when it was opened): that instance is the
// holder of what it acquires. Methods block for one round trip to the
// store; their errors other than ErrLeaseLost are the store's (unreachable,
// closed) and say nothing about the lease.
type Leaser interface {
	// AcquireLease tries once to take the lease name for ttl by the store's
	// clock. It is granted when the lease is free, expired, or held by
	// this instance (a new holding: the earlier one is fenced off); then
	// granted is true and the lease carries a fresh token. Otherwise
	// granted is false and the lease describes the current holding (its
	// fields zero when the store could not tell).
	AcquireLease(ctx context.Context, name string, ttl time.Duration) (l Lease, granted bool, err error)
	// RenewLease extends l for ttl from now by the store's clock, if l is still
	// the current, unexpired holding; otherwise it returns ErrLeaseLost.
	RenewLease(ctx context.Context, l Lease, ttl time.Duration) (Lease, error)
	// ReleaseLease frees l if it is still the current holding, so that another
	// instance may take it at once; it is no error when it is not.
	ReleaseLease(ctx context.Context, l Lease) error
	// Leases lists every lease the store knows, held or not, by name.
	Leases(ctx context.Context) ([]LeaseInfo, error)
	// SetCursorFenced saves a cursor as SetCursor does, provided l is the
	// current, unexpired holding, checked in the same statement as the
	// write; otherwise it changes nothing and returns ErrLeaseLost.
	SetCursorFenced(ctx context.Context, name, value string, l Lease) error
}

// Lease timings; HoldOptions' zero fields take these. See the comment at
// the top of this file for why.
const (
	LeaseTTL    = 6 * time.Second
	LeaseRenew  = 2 * time.Second
	LeaseRetry  = 500 * time.Millisecond
	LeaseMargin = time.Second
)

// HoldOptions tune Hold. The zero value takes the Lease* constants.
type HoldOptions struct {
	// TTL is how long a grant or renewal lasts by the store's clock.
	TTL time.Duration
	// Renew is the interval between renewals while they succeed.
	Renew time.Duration
	// Retry is the interval between attempts to acquire while another
	// holds the lease, and between renewals after one failed.
	Retry time.Duration
	// Margin is how long before TTL, on the holder's own clock, it stops.
	Margin time.Duration
	// Logger tells of waiting and of failed renewals; nil discards.
	Logger *slog.Logger
}

func (o HoldOptions) withDefaults() (HoldOptions, error) {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.TTL, LeaseTTL)
	def(&o.Renew, LeaseRenew)
	def(&o.Retry, LeaseRetry)
	def(&o.Margin, LeaseMargin)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Renew >= o.TTL-o.Margin {
		return o, fmt.Errorf("lease: renewal every %s does not come before the stop at TTL %s - margin %s", o.Renew, o.TTL, o.Margin)
	}
	return o, nil
}

// Held is a lease this instance holds, kept renewed in the background
// until Release or GiveUp, or until it is lost. Its methods are safe for
// concurrent use.
type Held struct {
	leaser Leaser
	opts   HoldOptions
	name   string

	ctx    context.Context
	cancel context.CancelCauseFunc
	// loop is cancelled when the renewals must stop: lost, released.
	loop       context.Context
	stopLoop   context.CancelFunc
	done       chan struct{} // closed when the renewal loop has exited
	deadline   *time.Timer   // loses the lease on the own clock
	releaseErr error
	released   sync.Once
	// waited: another instance held the lease when Hold tried it.
	waited bool

	mu    sync.Mutex
	lease Lease
}

// Hold waits until this instance holds the lease name, trying every
// opts.Retry while another holds it or the store fails, and returns it
// held; it returns ctx's cause when ctx ends first. The caller acts as the
// holder only under the returned Held's Context, passes Held.Lease to
// every fenced write, and calls Release when done (typically deferred):
// the lease stays renewed until then, so that the last fenced writes of a
// clean stop still count after ctx has ended.
func Hold(ctx context.Context, leaser Leaser, name string, opts HoldOptions) (*Held, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	var lastHolder InstanceID
	failing := false
	for {
		sent := time.Now()
		l, granted, err := leaser.AcquireLease(ctx, name, opts.TTL)
		switch {
		case err == nil && granted:
			h := hold(ctx, leaser, l, sent, opts)
			h.waited = lastHolder != ""
			if ctx.Err() != nil {
				// Granted as ctx ended: free it rather than leave it to expire.
				_ = h.Release(context.WithoutCancel(ctx))
				return nil, context.Cause(ctx)
			}
			if failing || lastHolder != "" {
				opts.Logger.Info("lease: acquired", "lease", name, "token", l.Token)
			}
			return h, nil
		case ctx.Err() != nil:
			return nil, context.Cause(ctx)
		case err != nil:
			if !failing {
				opts.Logger.Warn("lease: acquire failed; trying again", "lease", name, "err", err, "retry_in", opts.Retry)
			}
			failing = true
		default:
			failing = false
			if l.Holder != lastHolder && l.Holder != "" {
				opts.Logger.Info("lease: held by another instance; waiting", "lease", name, "holder", l.Holder, "expires", l.Expires)
				lastHolder = l.Holder
			}
		}
		t := time.NewTimer(opts.Retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// hold starts holding l, granted by a request sent at sent.
func hold(parent context.Context, leaser Leaser, l Lease, sent time.Time, opts HoldOptions) *Held {
	h := &Held{leaser: leaser, opts: opts, name: l.Name, lease: l, done: make(chan struct{})}
	h.ctx, h.cancel = context.WithCancelCause(parent)
	h.loop, h.stopLoop = context.WithCancel(context.Background())
	h.deadline = time.AfterFunc(time.Until(h.stopAt(sent)), func() {
		h.lose(fmt.Errorf("lease %s: not renewed in time: %w", h.name, ErrLeaseLost))
	})
	go h.renew(sent)
	return h
}

// stopAt is when the holder must have stopped, on its own clock, after a
// successful grant or renewal sent at sent.
func (h *Held) stopAt(sent time.Time) time.Time { return sent.Add(h.opts.TTL - h.opts.Margin) }

// lose ends the holding for cause: the context is cancelled and renewals
// stop. The row is left alone; Release frees it if it is still ours.
func (h *Held) lose(cause error) {
	h.cancel(cause)
	h.stopLoop()
}

// renew keeps the lease renewed until the loop is stopped.
func (h *Held) renew(sent time.Time) {
	defer close(h.done)
	next, until := sent.Add(h.opts.Renew), h.stopAt(sent)
	for {
		if !next.Before(until) {
			// No attempt left before the deadline loses the lease.
			<-h.loop.Done()
			return
		}
		t := time.NewTimer(time.Until(next))
		select {
		case <-h.loop.Done():
			t.Stop()
			return
		case <-t.C:
		}
		sent := time.Now()
		l, err := h.leaser.RenewLease(h.loop, h.Lease(), h.opts.TTL)
		switch {
		case h.loop.Err() != nil:
			return
		case err == nil:
			// Reset reports false when the deadline's func already
			// ran: the renewal came too late to count.
			if !h.deadline.Reset(time.Until(h.stopAt(sent))) {
				return
			}
			h.mu.Lock()
			h.lease.Expires = l.Expires
			h.mu.Unlock()
			next, until = sent.Add(h.opts.Renew), h.stopAt(sent)
		case errors.Is(err, ErrLeaseLost):
			h.lose(fmt.Errorf("lease %s: %w", h.name, err))
			return
		default:
			h.opts.Logger.Warn("lease: renewal failed; trying again", "lease", h.name, "err", err, "retry_in", h.opts.Retry)
			next = time.Now().Add(h.opts.Retry)
		}
	}
}

// Context is cancelled when the holder must stop acting: the lease was
// lost (context.Cause wraps ErrLeaseLost: a renewal was refused, renewals
// failed until the own-clock deadline, or GiveUp was called), it was
// released, or the context given to Hold ended.
func (h *Held) Context() context.Context { return h.ctx }

// Waited reports whether Hold found the lease held by another instance
// before it got it: what this instance knew of the leased thing from
// before may have changed meanwhile.
func (h *Held) Waited() bool { return h.waited }

// Lease returns the holding, to pass to fenced writes.
func (h *Held) Lease() Lease {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lease
}

// Release stops renewing, cancels Context and frees the lease in the store
// (if it is still this holding) so that a waiting instance takes it at its
// next attempt. It waits for a renewal under way to end first, so that none
// extends the lease after it was freed. Only the first call (of Release or
// GiveUp) frees the lease; later calls return its result.
func (h *Held) Release(ctx context.Context) error {
	return h.end(ctx, context.Canceled)
}

// GiveUp is Release for an outside sign that another consumer is active
// (Telegram's 409 to getUpdates): Context's cause wraps ErrLeaseLost and
// cause. The caller should wait before Hold again, so that instances do
// not take the lease from each other in turn while the other consumer
// lasts.
func (h *Held) GiveUp(ctx context.Context, cause error) error {
	return h.end(ctx, fmt.Errorf("lease %s given up: %w: %w", h.name, ErrLeaseLost, cause))
}

func (h *Held) end(ctx context.Context, cause error) error {
	h.released.Do(func() {
		h.cancel(cause)
		h.stopLoop()
		<-h.done
		h.deadline.Stop()
		if err := h.leaser.ReleaseLease(ctx, h.Lease()); err != nil {
			h.releaseErr = fmt.Errorf("lease %s: release: %w", h.name, err)
		}
	})
	return h.releaseErr
}

// Conflict backoff for Lead: the first wait after a give-up is the TTL, so
// that another instance may take the lease meanwhile; it doubles with
// every give-up in a row, up to LeaseConflictMaxBackoff.
const LeaseConflictMaxBackoff = time.Minute

// Lead runs work each time this instance comes to hold lease name, until
// ctx ends: the loop of a consumer that must be alone (a poller, a sync).
// work acts under h.Context() and passes h.Lease() to its fenced writes; it
// returns when that context ends, or with an error:
//
//   - wrapping ErrLeaseConflict (another consumer is active): Lead gives
//     the lease up, waits (from the TTL, doubling up to
//     LeaseConflictMaxBackoff) and holds it again;
//   - wrapping ErrLeaseLost (a fenced write was refused), or nil after
//     the lease was lost: Lead releases what is left and holds again,
//     waiting its turn;
//   - anything else, or nil while the lease is held: Lead releases the
//     lease and returns the error.
//
// The lease is released (bounded by the TTL, after which it expires
// anyway) before Lead holds it again or returns. Lead returns nil when ctx
// ends.
func Lead(ctx context.Context, leaser Leaser, name string, opts HoldOptions, work func(h *Held) error) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	release := func(h *Held, giveUp error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), opts.TTL)
		defer cancel()
		var err error
		if giveUp != nil {
			err = h.GiveUp(rctx, giveUp)
		} else {
			err = h.Release(rctx)
		}
		if err != nil {
			opts.Logger.Warn("lease: release failed; it expires on its own", "lease", name, "err", err)
		}
	}
	backoff := time.Duration(0)
	for {
		if backoff > 0 {
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
		}
		h, err := Hold(ctx, leaser, name, opts)
		if err != nil {
			return nil // ctx ended: Hold fails for nothing else once opts are valid
		}
		err = work(h)
		lost := errors.Is(context.Cause(h.Context()), ErrLeaseLost)
		switch {
		case errors.Is(err, ErrLeaseConflict):
			backoff = min(max(2*backoff, opts.TTL), LeaseConflictMaxBackoff)
			opts.Logger.Warn("lease: gave it up, another consumer is active", "lease", name, "err", err, "retry_in", backoff)
			release(h, err)
		case errors.Is(err, ErrLeaseLost), err == nil && lost:
			backoff = 0
			opts.Logger.Warn("lease: lost; waiting to hold it again", "lease", name,
				"err", cmp.Or(err, context.Cause(h.Context())))
			release(h, nil)
		default:
			release(h, nil)
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// LeaseRowsKept is how long a lease's row stays after it was last held
// (released, or expired by the store's clock) before a LeasePruner may
// remove it. Rows are made per name (one per session whose agent ran, for
// instance), so without pruning they would pile up. Removing a row lets
// its tokens start again at 1; that is safe after an hour because a holder
// id is never reused by another process, and a write of a holding that
// ended an hour ago has long failed by its deadline.
const LeaseRowsKept = time.Hour

// LeasePruner is a Leaser whose lease rows outlive their holdings (one row
// per name, PostgreSQL): PruneLeases removes the rows of leases free
// (released or expired, by the store's clock) for at least freeFor and
// returns how many. A lease acquired again meanwhile is kept. It blocks for
// one round trip; its errors are the store's.
type LeasePruner interface {
	PruneLeases(ctx context.Context, freeFor time.Duration) (int, error)
}
