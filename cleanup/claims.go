package cleanup

import (
	"context"
	"time"

	"github.com/parley-chat/parley/core"
)

// Claims share the due deletions among instances sharing a store
// (ClaimOptions), as core/delivery's claims share the journal. A rule that
// fires marks its rows due and claims them for this instance in one store
// write (core.CleanupClaimer.ClaimDueCleanup); a row another live
// instance already holds is left to it. While a deletion waits in the
// outbox (behind a platform's pacing, possibly for minutes) its claim is
// renewed every ClaimOptions.Renew. A deletion that failed is no longer
// renewed: its claim expires and a scan takes it up again, TTL later. On a
// clean stop the deletions not carried out are released (Stop), so that
// the next scan of a surviving instance takes them at once; after a kill
// their claims expire. Every instance scans every ClaimOptions.Scan for
// due rows nobody holds and deletes them, so nothing waits for a start-up,
// and Replay at start-up is one such scan: it never re-issues a deletion a
// live instance holds.
//
// The repeat window: a deletion whose claim lapsed while it still waited
// in this instance's outbox (the store unreachable for TTL − Renew) may be
// issued by the instance that took it over as well; the second call finds
// the message gone, which counts as done. The outbox cannot withdraw a
// queued operation, so this instance does not stop it.

// DefaultClaimTTL is ClaimOptions.TTL when zero: the journal's
// (delivery.DefaultClaimTTL), so a dead instance's deletions are taken
// over within TTL + Scan (8 s) as its answers are.
const DefaultClaimTTL = 6 * time.Second

// claimPage is how many due rows a scan claims at a time.
const claimPage = 256

// ClaimOptions share the ledger's due deletions with other instances of
// the same store. The zero value shares nothing: every due row is this
// instance's, and rows left due are replayed at the next start-up, as with
// one instance on a bbolt file.
type ClaimOptions struct {
	// Store grants the claims; nil disables claiming.
	Store core.CleanupClaimer
	// Instance names this process, unique among the instances.
	Instance core.InstanceID
	// TTL is how long a claim lasts, by the store's clock, when not
	// renewed; zero means DefaultClaimTTL.
	TTL time.Duration
	// Renew is how often the claims held are renewed; zero means TTL/3.
	Renew time.Duration
	// Scan is how often to look for due rows nobody holds; zero means
	// TTL/3.
	Scan time.Duration
}

func (o ClaimOptions) withDefaults() ClaimOptions {
	if o.TTL <= 0 {
		o.TTL = DefaultClaimTTL
	}
	if o.Renew <= 0 {
		o.Renew = o.TTL / 3
	}
	if o.Scan <= 0 {
		o.Scan = o.TTL / 3
	}
	return o
}

// flight is a deletion handed to the outbox and not finished yet: n is how
// many times it is enqueued (a repeat supersedes the earlier one).
type flight struct {
	ref core.MessageRef
	n   int
}

// refKey identifies a ledger row.
func refKey(r core.MessageRef) string {
	return string(r.Adapter) + "\x00" + r.Place.Chat + "\x00" + r.Place.Thread + "\x00" + r.ID
}

// markDue records rows, which are due, and returns those this instance is
// to delete: all of them without claims, with claims the ones granted.
func (l *Ledger) markDue(ctx context.Context, rows []core.CleanupEntry) ([]core.CleanupEntry, error) {
	c := l.opts.Claims
	if c.Store == nil {
		return rows, l.store.AddCleanup(ctx, rows...)
	}
	granted, err := c.Store.ClaimDueCleanup(ctx, string(c.Instance), c.TTL, rows...)
	if err != nil {
		return nil, err
	}
	mine := make(map[string]bool, len(granted))
	for _, r := range granted {
		mine[refKey(r)] = true
	}
	out := rows[:0:0]
	for _, r := range rows {
		if mine[refKey(r.Ref)] {
			out = append(out, r)
		}
	}
	return out, nil
}

// RunClaims renews the claims on the deletions this instance is carrying
// out every ClaimOptions.Renew and every ClaimOptions.Scan takes the due
// rows nobody holds, until ctx ends; once Run ended (the daemon is
// stopping and draining its outbox) it only renews. Without claims it
// returns at once.
func (l *Ledger) RunClaims(ctx context.Context) {
	c := l.opts.Claims
	if c.Store == nil {
		return
	}
	renew := time.NewTicker(c.Renew)
	defer renew.Stop()
	scan := time.NewTicker(c.Scan)
	defer scan.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renew.C:
			l.renew(ctx)
		case <-scan.C:
			if l.stopping.Load() {
				continue
			}
			if n, err := l.takeFree(ctx); err != nil {
				l.log.Warn("cleanup: scan for pending deletions", "err", err)
			} else if n > 0 {
				l.log.Info("cleanup: taking over pending deletions", "count", n)
			}
		}
	}
}

// renew extends the claims on the deletions in flight.
func (l *Ledger) renew(ctx context.Context) {
	refs := l.inFlight()
	if len(refs) == 0 {
		return
	}
	c := l.opts.Claims
	held, err := c.Store.RenewCleanupClaims(ctx, string(c.Instance), refs, c.TTL)
	if err != nil {
		l.log.Warn("cleanup: renew claims", "err", err)
		return
	}
	if lost := len(refs) - len(held); lost > 0 {
		l.log.Debug("cleanup: deletions taken over by another instance or done meanwhile", "count", lost)
	}
}

// takeFree claims the due rows nobody holds and deletes them, a page at a
// time; it returns how many it took. A row this instance is still
// deleting (its claim lapsed and came back) is not enqueued again.
func (l *Ledger) takeFree(ctx context.Context) (int, error) {
	c := l.opts.Claims
	total := 0
	for {
		rows, err := c.Store.ClaimPendingCleanup(ctx, string(c.Instance), claimPage, c.TTL)
		if err != nil {
			return total, err
		}
		l.mu.Lock()
		fresh := rows[:0:0]
		for _, r := range rows {
			if l.flights[refKey(r.Ref)] == nil {
				fresh = append(fresh, r)
			}
		}
		l.mu.Unlock()
		total += len(fresh)
		l.delete(ctx, fresh)
		if len(rows) < claimPage {
			return total, nil
		}
	}
}

// inFlight returns the refs of the deletions handed to the outbox and not
// finished.
func (l *Ledger) inFlight() []core.MessageRef {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]core.MessageRef, 0, len(l.flights))
	for _, f := range l.flights {
		out = append(out, f.ref)
	}
	return out
}

// Stop is called once the outbox is closed: the deletions not carried out
// stay due. With claims they are released, so that another instance takes
// them at its next scan; without, the next start-up replays them. One line
// says how many; the deletions themselves were not failures.
func (l *Ledger) Stop(ctx context.Context) {
	l.mu.Lock()
	left := make([]core.MessageRef, 0, len(l.flights)+len(l.abandoned))
	for _, f := range l.flights {
		left = append(left, f.ref)
	}
	for k, r := range l.abandoned {
		if l.flights[k] == nil {
			left = append(left, r)
		}
	}
	l.mu.Unlock()
	if len(left) == 0 {
		return
	}
	c := l.opts.Claims
	if c.Store == nil {
		l.log.Info("cleanup: stopped with deletions pending; the next start replays them", "count", len(left))
		return
	}
	if err := c.Store.ReleaseCleanupClaims(ctx, string(c.Instance), left); err != nil {
		l.log.Warn("cleanup: stopped with deletions pending; not released, other instances take them when the claims expire",
			"count", len(left), "err", err)
		return
	}
	l.log.Info("cleanup: stopped with deletions pending; released to the other instances", "count", len(left))
}
