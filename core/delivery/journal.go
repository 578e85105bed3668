package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parley-chat/parley/core"
)

// journal tracks the operations of the journaled events being delivered
// (see Dispatcher): which keys each event still waits for, which an
// earlier run confirmed, and when the last one takes the event out of the
// store's journal.
type journal struct {
	store core.Store
	log   *slog.Logger
	// onConfirmed is DispatcherOptions.OnConfirmed.
	onConfirmed func(adapter core.AdapterName, window time.Duration)
	// claims are this instance's claims on journaled events (claims.go);
	// nil without ClaimOptions.Store.
	claims *claims

	mu sync.Mutex
	// deliveries are the journaled events being delivered, by Seq.
	deliveries map[uint64]*delivery
	// finished, while a scan for abandoned deliveries runs, holds the
	// events finished since it began: the scan read them before their
	// last confirmation and must not deliver them again.
	finished map[uint64]bool
}

// delivery tracks the operations of one journaled event. Its maps are
// guarded by the journal's lock.
type delivery struct {
	seq uint64
	// outstanding are the keys of operations enqueued and not confirmed.
	outstanding map[string]bool
	// done are the keys confirmed in an earlier run (from the journal).
	done map[string]bool
	// sealed is set once every operation the event needs was enqueued;
	// until then an empty outstanding set does not finish it.
	sealed bool
	// lost is set when this instance may no longer send the event's
	// operations (claims.go): those still queued end with errClaimLost.
	lost bool
	// handOff is set when the event is also meant for adapters this
	// instance does not run: once its operations here are confirmed it
	// is handed over (handoff.go), not finished; served are the adapters
	// it was delivered to here.
	handOff bool
	served  []core.AdapterName
}

func newJournal(store core.Store, log *slog.Logger, onConfirmed func(core.AdapterName, time.Duration)) *journal {
	return &journal{store: store, log: log, onConfirmed: onConfirmed, deliveries: map[uint64]*delivery{}}
}

// opKey is the journal key of an operation: adapter, what, and index.
func opKey(a core.AdapterName, what string, i int) string {
	return string(a) + "/" + what + "/" + strconv.Itoa(i)
}

// sendKey is the idempotency key of a logical send (OutMessage.Key).
func sendKey(seq uint64, key string) string {
	if seq == 0 {
		return ""
	}
	return strconv.FormatUint(seq, 10) + "/" + key
}

// count is the number of journaled events whose operations are not all
// confirmed yet, of those this instance delivers (not those whose claim it
// lost, claims.go).
func (jr *journal) count() int {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	n := 0
	for _, j := range jr.deliveries {
		if !j.lost {
			n++
		}
	}
	return n
}

// countBy is, for each adapter, the number of journaled events with an
// operation of that adapter not confirmed yet.
func (jr *journal) countBy() map[core.AdapterName]int {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	out := map[core.AdapterName]int{}
	for _, j := range jr.deliveries {
		if j.lost {
			continue
		}
		seen := map[string]bool{}
		for key := range j.outstanding {
			a, _, _ := strings.Cut(key, "/") // opKey
			if !seen[a] {
				seen[a] = true
				out[core.AdapterName(a)]++
			}
		}
	}
	return out
}

// track starts tracking a journaled event's operations. It returns nil for
// events that are not journaled and for one already being delivered.
func (jr *journal) track(e core.Event, done []string) *delivery {
	if e.Seq == 0 || !e.Journaled() {
		return nil
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if old, busy := jr.deliveries[e.Seq]; busy && !old.lost || jr.finished[e.Seq] {
		return nil
	}
	j := &delivery{seq: e.Seq, outstanding: map[string]bool{}, done: map[string]bool{}}
	for _, k := range done {
		j.done[k] = true
	}
	jr.deliveries[e.Seq] = j
	return j
}

// loadTimeout bounds the read of an event's confirmed keys (load).
const loadTimeout = 10 * time.Second

// load adds to j the keys the store has confirmed for it, for an event
// claimed as it was committed (dispatched from the bus, not read from the
// journal with its keys) by an instance whose claims are shared. Being
// claimable is no proof that nothing of it was sent: this instance's own
// scan reads as far as the cluster feed (ClaimOptions.Seen), which may run
// ahead of the dispatcher's backlog, and may have served the event and
// handed it over, its claim free again; another instance's scan may have
// served its own platforms and handed it over the same way. Either wrote
// its confirmations and markers before it let the event go, so the keys
// read here, once j is tracked (no other delivery of the event runs here
// any more, and the claim keeps every other instance off it), are all
// that was sent. It reports false when the event is no longer journaled.
func (jr *journal) load(ctx context.Context, j *delivery) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
	defer cancel()
	page, err := jr.store.Deliveries(ctx, j.seq-1, 1)
	if err != nil {
		return false, fmt.Errorf("journal: confirmed keys of event %d: %w", j.seq, err)
	}
	if len(page) == 0 || page[0].Event.Seq != j.seq {
		return false, nil
	}
	jr.mu.Lock()
	for _, k := range page[0].Done {
		j.done[k] = true
	}
	jr.mu.Unlock()
	return true, nil
}

// drop stops tracking j without finishing it: nothing of it was sent here.
func (jr *journal) drop(j *delivery) {
	jr.mu.Lock()
	j.lost = true
	jr.mu.Unlock()
	jr.forget(j)
}

// add registers the operation key of j; it reports false when the
// operation was confirmed in an earlier run and must not run again. A nil j
// (an event that is not journaled) always runs.
func (jr *journal) add(j *delivery, key string) bool {
	if j == nil {
		return true
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	if j.done[key] || j.outstanding[key] {
		return false
	}
	j.outstanding[key] = true
	return true
}

// confirmed reports whether the operation key of j is confirmed (false for
// a nil j).
func (jr *journal) confirmed(j *delivery, key string) bool {
	if j == nil {
		return false
	}
	jr.mu.Lock()
	defer jr.mu.Unlock()
	return j.done[key]
}

// seal marks every operation of j enqueued; if all are confirmed already
// (or there were none) the event leaves the journal.
func (jr *journal) seal(ctx context.Context, j *delivery) {
	if j == nil {
		return
	}
	jr.mu.Lock()
	j.sealed = true
	last := len(j.outstanding) == 0 && !j.lost
	jr.mu.Unlock()
	if last {
		if err := jr.store.ConfirmDelivery(context.WithoutCancel(ctx), j.seq, "", true); err != nil {
			jr.log.Error("journal: finish delivery", "seq", j.seq, "err", err)
		}
		jr.forget(j)
	}
}

// forget stops tracking j once its journal row is gone, so Delivering
// counts an event until its confirmation is durable.
func (jr *journal) forget(j *delivery) {
	jr.mu.Lock()
	if jr.deliveries[j.seq] == j {
		delete(jr.deliveries, j.seq)
		if jr.finished != nil {
			jr.finished[j.seq] = true
		}
	}
	jr.mu.Unlock()
}

// confirm records the outcome of one journaled operation. An operation the
// outbox dropped at shutdown stays in the journal for the next start.
func (jr *journal) confirm(j *delivery, a core.AdapterName, key string, err error) {
	if j == nil || IsClosed(err) {
		return
	}
	if lostClaim(err) {
		// Not sent: the event is another instance's now, or the scan's
		// to take again.
		jr.drop(j)
		return
	}
	answered := time.Now()
	jr.mu.Lock()
	delete(j.outstanding, key)
	j.done[key] = true
	last := j.sealed && len(j.outstanding) == 0
	handOver := last && j.handOff
	jr.mu.Unlock()
	err = jr.store.ConfirmDelivery(context.Background(), j.seq, key, last && !handOver)
	switch {
	case handOver && err == nil:
		jr.handOver(context.Background(), j)
	case last:
		jr.forget(j)
	}
	if err != nil {
		jr.log.Error("journal: confirm delivery", "seq", j.seq, "op", key, "err", err)
		return
	}
	if jr.onConfirmed != nil {
		jr.onConfirmed(a, time.Since(answered))
	}
}

// guard wraps the Run of an operation of j so that it sends nothing once
// this instance may no longer act on j's claim (claims.go): the operation
// ends with errClaimLost instead. A call it lets start is cancelled if
// the claim could expire meanwhile, so that it cannot overlap the next holder's
// (what the platform took before the cancel is the repeat window). Without
// claims, and for an event that is not journaled, it returns run itself.
func (jr *journal) guard(j *delivery, run func(context.Context, core.Place) error) func(context.Context, core.Place) error {
	if j == nil || jr.claims == nil {
		return run
	}
	return func(ctx context.Context, at core.Place) error {
		jr.mu.Lock()
		lost := j.lost
		jr.mu.Unlock()
		until, expires, held := jr.claims.window(j.seq)
		if lost || !held || !time.Now().Before(until) {
			return fmt.Errorf("event %d: %w", j.seq, errClaimLost)
		}
		ctx, cancel := jr.claims.hold(ctx, j.seq, expires)
		defer cancel()
		return run(ctx, at)
	}
}

// busy reports whether this instance is delivering the event seq.
func (jr *journal) busy(seq uint64) bool {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	j, ok := jr.deliveries[seq]
	return ok && !j.lost
}

// claimed is the seqs of the events this instance is delivering: the
// claims it must keep.
func (jr *journal) claimed() []uint64 {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	out := make([]uint64, 0, len(jr.deliveries))
	for seq, j := range jr.deliveries {
		if !j.lost {
			out = append(out, seq)
		}
	}
	return out
}

// lose marks the deliveries of seqs lost: their claims went to another
// instance or were released.
func (jr *journal) lose(seqs []uint64) {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	for _, s := range seqs {
		if j, ok := jr.deliveries[s]; ok {
			j.lost = true
		}
	}
}

// beginScan starts recording the events finished, for a scan (finished).
func (jr *journal) beginScan() {
	jr.mu.Lock()
	jr.finished = map[uint64]bool{}
	jr.mu.Unlock()
}

// finishedInScan reports whether the event seq finished since the scan
// began.
func (jr *journal) finishedInScan(seq uint64) bool {
	jr.mu.Lock()
	defer jr.mu.Unlock()
	return jr.finished[seq]
}

// endScan stops recording them.
func (jr *journal) endScan() {
	jr.mu.Lock()
	jr.finished = nil
	jr.mu.Unlock()
}
