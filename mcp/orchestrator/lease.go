package orchestrator

import (
	"context"
	"errors"

	"github.com/parley-chat/parley/core"
)

// Several instances (Options.Leases). Every instance's orchestrator hears
// of every session's messages (its server notifies from the cluster feed),
// so each would run an agent for the same session. A worker therefore
// acts only while its instance holds the session's lease, "session/<id>"
// (core.Hold: fenced, expiring by the store's clock, given up on the
// holder's own clock first): it waits for the lease before it reads the
// state, and everything it does — the state it saves, the process, the
// calls that show output — happens under the lease's context. A worker
// holds the lease as long as it lives (its process running, idle or not,
// a turn pending or running) and releases it when it retires (no process,
// nothing to do) or the session closes, so an idle or closed session
// holds no lease: the row is free and the store prunes it later.
//
// When an instance tries: whenever it would start a worker — a person's
// message in the session, or the scan of the open sessions after each
// connection. A worker that finds the lease held waits for it (trying
// every core.LeaseRetry) for as long as the holder keeps it: the message
// that woke it is the holder's to answer, but if the holder dies, the
// waiter takes the session over within the lease's failover time and reads
// the inbox from the agent's watermark, which the dead holder saved only
// for turns that ended: the turn it was running is handed again, answered
// once, and no message is lost. A waiter that gets the lease after a clean
// release finds nothing past the watermark and retires at once. The cost
// is one statement per waiter every core.LeaseRetry while another
// instance runs the session; waiters exist only for sessions that had a
// message while another instance ran them, and they end when it releases.
//
// A worker that waited for another holder does not repair an unyielded
// turn (Orchestrator.scan): the status its scan saw is stale, and a turn
// the holder yielded since must not be completed twice. A holder that died
// between a turn's saved watermark and its yield leaves that turn open
// until a scan finds it with the lease free (the next reconnection or
// start of an instance).
//
// A worker whose lease is lost (renewals refused or failing until its own
// deadline) stops its process at once, like a clean stop, and a new
// worker waits for the lease again, so that an instance cut off from the
// store for a moment resumes the session when it comes back and nobody
// else took it. The agent's state (the agent.state cursor) is written
// fenced by the holding (Leaser.SetCursorFenced): a save by a holder whose
// lease passed on changes nothing and ends its worker, so it cannot set
// the watermark back behind the next holder's and have a turn handed again.

// leaseName is the lease of session id's agent.
func leaseName(id string) string { return "session/" + id }

// hold waits until this instance holds session id's lease and returns the
// context the worker acts under, ended when the lease is lost, and the
// function that releases it. Without Options.Leases (one instance) the
// worker acts under ctx. It fails only when ctx ends first.
func (w *worker) hold(ctx context.Context) (context.Context, func(), error) {
	if w.o.opts.Leases == nil {
		return ctx, func() {}, nil
	}
	opts := w.o.opts.Lease
	opts.Logger = w.log
	h, err := core.Hold(ctx, w.o.opts.Leases, leaseName(w.id), opts)
	if err != nil {
		return nil, nil, err
	}
	w.held = h
	if h.Waited() {
		// Another instance ran the session meanwhile: what the scan
		// that made this worker saw of its status is stale, and
		// completing a turn that holder yielded would notify people
		// twice.
		w.repair = false
	}
	release := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
		defer cancel()
		if err := h.Release(rctx); err != nil {
			w.log.Warn("releasing the session's lease failed; it expires on its own", "err", err)
		}
	}
	return h.Context(), release, nil
}

// lostLease says the worker's context ended because its lease was lost,
// not because the orchestrator stops.
func lostLease(run, acting context.Context) bool {
	return run.Err() == nil && errors.Is(context.Cause(acting), core.ErrLeaseLost)
}
