package delivery

import (
	"context"
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// Hand-off between instances that run different adapters
// (ClaimOptions.Shared). The instance that claims a journaled event may
// not run every adapter the event is meant for: Telegram enabled on one
// instance only, the agent's answer posted through another. Routing is
// then decided from the session, not from this instance's adapters alone:
// the targets it runs get their operations as usual, and the targets it
// does not run (the session's last input origin when that is a platform
// this instance lacks; on a broadcast, every platform the session is
// bound to; for a closed question, every platform showing it) are left to
// an instance that runs them. Once the operations
// of its own targets are all confirmed, the claimant records a marker per
// target it served ("<adapter>/delivered/0", a confirmed key like any
// other) and releases its claim without finishing the event; it passes
// the event over in its later scans. Another instance's scan, which reads
// up to what the cluster feed has published (ClaimOptions.Seen), claims it,
// skips every target with a marker or a confirmed operation, delivers the
// rest, and finishes it (or hands it on, for a third platform). So each
// target is served once, by an instance that runs it, and the event leaves
// the journal when every target was. An event meant for a platform that no
// instance runs stays journaled, claimed and released by each scan, until
// one does: it is never dropped, unlike on a single instance, which
// broadcasts to the adapters it has.
//
// What is not journaled (a streaming output's edits, titles, statuses,
// typing, tool progress) is shown only by the instance that committed it;
// on a platform it lacks, the final output and the turn's notification
// arrive through the hand-off, the live edits before them do not.

// handOffTimeout bounds the store writes of a hand-off.
const handOffTimeout = 10 * time.Second

// deliveredKey marks that the event's targets on adapter a were served.
func deliveredKey(a core.AdapterName) string { return opKey(a, "delivered", 0) }

// route returns the adapters e of s goes to on this instance (here, in
// the Router's order) and those it is meant for that this instance does
// not run and no claimant served yet (remote): the event is handed over
// for those. Without shared claims, and for events that are not journaled,
// it is the Router's targets and nothing remote. Targets an earlier
// claimant served are left out of both.
func (d *Dispatcher) route(s core.Session, e core.Event, j *delivery) (here, remote []core.AdapterName) {
	here = d.router.Targets(s, e)
	if j != nil && d.journal.claims.shared() {
		has := func(n core.AdapterName) bool { _, ok := d.router.Adapter(n); return ok }
		switch o := s.LastInputOrigin; {
		case e.SourceOnly:
			if e.Origin.IsUI() && !has(e.Origin.Adapter()) {
				remote = append(remote, e.Origin.Adapter())
			}
		case o.IsUI() && !has(o.Adapter()):
			// To where the person last wrote, which another instance
			// runs: not broadcast here instead.
			here, remote = nil, append(remote, o.Adapter())
		case o.IsUI() && d.router.Reaches(s, o.Adapter()):
		default:
			for n := range s.Bindings {
				if !has(n) {
					remote = append(remote, n)
				}
			}
		}
		slices.Sort(remote)
	}
	if j != nil {
		served := func(n core.AdapterName) bool { return d.journal.served(j, n) }
		here = slices.DeleteFunc(here, served)
		remote = slices.DeleteFunc(remote, served)
	}
	return here, remote
}

// shownAt splits the adapters showing a closed question (e.Refs) into
// those this instance runs (here) and those it does not that no claimant
// served yet (remote), with shared claims; nothing otherwise. The
// withdrawal edits the question wherever it is shown, whatever the
// routing, so a question another instance's platform shows is handed over.
func (d *Dispatcher) shownAt(e core.Event, j *delivery) (here, remote []core.AdapterName) {
	if j == nil || !d.journal.claims.shared() {
		return nil, nil
	}
	for _, ref := range e.Refs {
		n := ref.Adapter
		switch _, ok := d.router.Adapter(n); {
		case slices.Contains(here, n) || slices.Contains(remote, n):
		case ok:
			here = append(here, n)
		case !d.journal.served(j, n):
			remote = append(remote, n)
		}
	}
	return here, remote
}

// served reports whether an earlier claimant served j's targets on a: it
// left a's marker.
func (jr *journal) served(j *delivery, a core.AdapterName) bool {
	return jr.confirmed(j, deliveredKey(a))
}

// handOff marks j's operations all enqueued, to be handed over rather
// than finished once they are confirmed: here are the adapters this
// instance served, remote those it leaves to others.
func (jr *journal) handOff(ctx context.Context, j *delivery, here, remote []core.AdapterName) {
	jr.log.Debug("journal: handing the event over for adapters this instance does not run", "seq", j.seq, "adapters", remote)
	jr.mu.Lock()
	j.sealed, j.served = true, here
	j.handOff = true
	last := len(j.outstanding) == 0 && !j.lost
	jr.mu.Unlock()
	if last {
		jr.handOver(ctx, j)
	}
}

// handOver records, once j's operations here are all confirmed, which
// adapters this instance served, and releases the claim on the event so
// that an instance running the others takes it; this one passes it over
// from now on. j stays tracked (its claim renewed, this instance's scans
// keeping off it) until the markers are durable and the event is recorded
// as passed over, so that no scan here takes it in between. When a marker
// cannot be written, the claim is left to expire: the next claimant, this
// instance's scan included, dispatches the event again, its confirmed
// operations skipped, and marks it then.
func (jr *journal) handOver(ctx context.Context, j *delivery) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handOffTimeout)
	defer cancel()
	for _, a := range j.served {
		if jr.served(j, a) {
			continue
		}
		if err := jr.store.ConfirmDelivery(ctx, j.seq, deliveredKey(a), false); err != nil {
			jr.log.Error("journal: hand over", "seq", j.seq, "adapter", a, "err", err)
			jr.forget(j)
			return
		}
	}
	c := jr.claims
	c.passOver(j.seq)
	jr.forget(j)
	if err := c.opts.Store.ReleaseClaims(ctx, c.opts.Instance, []uint64{j.seq}); err != nil {
		jr.log.Warn("journal: release a handed-over event; it is taken over when its claim expires", "seq", j.seq, "err", err)
	}
}
