package daemon

import (
	"context"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// prune removes, once at start and then every PruneInterval until ctx
// ends, the dedup keys, session reservations and cleanup-ledger rows older
// than Retention (store.Store.Prune, which works in small batches next to
// the ordinary writes), and the copies of files nothing holds any more
// (files.Store.Collect). A failed run is logged and retried at the next
// tick: nothing depends on pruning but the size of the data directory.
func (d *Daemon) prune(ctx context.Context) {
	if d.opts.Retention < 0 {
		return
	}
	tick := time.NewTicker(d.opts.PruneInterval)
	defer tick.Stop()
	for {
		d.PruneOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// PruneOnce removes what is older than the retention now and returns what it
// removed. Run calls it on its timer; errors are logged.
func (d *Daemon) PruneOnce(ctx context.Context) store.PruneStats {
	st, err := d.Store.Prune(ctx, store.PruneOptions{
		Before:         time.Now().Add(-d.opts.Retention),
		CursorPrefixes: []string{commands.ReservationPrefix},
	})
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.Warn("pruning old dedup keys and cleanup rows failed; retrying at the next interval",
			"err", err, "interval", d.opts.PruneInterval)
	case st != store.PruneStats{}:
		d.log.Info("pruned records older than the retention", "retention", d.opts.Retention,
			"dedup_keys", st.Dedup, "reservations", st.Cursors, "cleanup_rows", st.Ledger)
	}
	d.pruneLeases(ctx)
	d.collectFiles(ctx)
	return st
}

// collectFiles removes the copies of files no undelivered journal entry
// and no message within the retention refers to, nor anything of this
// process holds (see store/files).
func (d *Daemon) collectFiles(ctx context.Context) {
	c, err := d.Files.Collect(ctx, d.Store, time.Now().Add(-d.opts.Retention))
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.Warn("removing the copies of files no longer needed failed; retrying at the next interval", "err", err, "interval", d.opts.PruneInterval)
	case c.Files > 0:
		d.log.Info("removed copies of files no longer needed", "retention", d.opts.Retention, "files", c.Files, "bytes", c.Bytes)
	}
}

// pruneLeases removes the rows of leases nobody held for
// core.LeaseRowsKept (a session's agent lease, once the session went
// quiet), where the store keeps them (PostgreSQL). It runs in the same
// pass with its own age, not the retention: a free lease row keeps
// nothing anyone reads.
func (d *Daemon) pruneLeases(ctx context.Context) {
	p, ok := d.Store.(core.LeasePruner)
	if !ok {
		return
	}
	n, err := p.PruneLeases(ctx, core.LeaseRowsKept)
	switch {
	case err != nil && ctx.Err() == nil:
		d.log.Warn("pruning free lease rows failed; retrying at the next interval", "err", err, "interval", d.opts.PruneInterval)
	case n > 0:
		d.log.Info("pruned the rows of leases free for long", "free_for", core.LeaseRowsKept, "leases", n)
	}
}
