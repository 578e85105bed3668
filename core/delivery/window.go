package delivery

import (
	"slices"
	"time"

	"github.com/parley-chat/parley/core"
)

// window is the state of one sliding-window limit in one scope: the start
// times of the last N operations it counted, oldest first.
type window struct {
	rate  core.Rate
	takes []time.Time
	// kept is the share of the window reserved for OpSend (Limit.SendShare).
	kept float64
	// learn is the learned budget the window counts by, when its Limit
	// learns (learn.go).
	learn *learning
	// heldAll and heldOthers are when the shared ledger said the budget
	// is free again, after it refused a take (ledger.go): for every kind,
	// and for the kinds that may not take the reserved slots.
	heldAll, heldOthers time.Time
}

// reserved is the number of the window's slots only OpSend may take: the
// kept share of N, at least one when a share is kept, and never all of
// them.
func (w *window) reserved() int {
	if w.kept <= 0 || w.rate.N < 2 {
		return 0
	}
	return min(w.rate.N-1, max(1, int(float64(w.rate.N)*w.kept)))
}

// readyAtFor is the earliest time one more operation of kind k fits (now
// if it fits): every
// slot for OpSend, all but the reserved ones for the other kinds.
func (w *window) readyAtFor(now time.Time, k core.OpKind) time.Time {
	n := w.slotsFor(k)
	w.expire(now)
	at := now
	if len(w.takes) >= n {
		at = w.takes[len(w.takes)-n].Add(w.rate.Per)
	}
	if h := w.heldFor(k); h.After(at) {
		at = h
	}
	return at
}

// heldFor is until when the shared ledger holds ops of kind k back (zero
// when it never did).
func (w *window) heldFor(k core.OpKind) time.Time {
	if k != core.OpSend && w.heldOthers.After(w.heldAll) {
		return w.heldOthers
	}
	return w.heldAll
}

// hold records that the shared ledger refused an op of kind k until
// until: all kinds wait when the op could use every slot (a send, or a
// window of one), the others only when it could not — in the ledger every
// window of two or more keeps slots for sends (sharedSlotsFor).
func (w *window) hold(k core.OpKind, until time.Time) {
	h := &w.heldAll
	if k != core.OpSend && w.rate.N >= 2 {
		h = &w.heldOthers
	}
	if until.After(*h) {
		*h = until
	}
}

// slotsFor is how many of the window's slots an op of kind k may use, here
// and in the shared ledger.
func (w *window) slotsFor(k core.OpKind) int {
	if k != core.OpSend {
		return w.rate.N - w.reserved()
	}
	return w.rate.N
}

// take counts one operation at now.
func (w *window) take(now time.Time) {
	w.expire(now)
	w.takes = append(w.takes, now)
	if len(w.takes) > w.rate.N {
		w.takes = slices.Delete(w.takes, 0, len(w.takes)-w.rate.N)
	}
}

// last is when the newest counted operation started (zero when none).
func (w *window) last() time.Time {
	if len(w.takes) == 0 {
		return time.Time{}
	}
	return w.takes[len(w.takes)-1]
}

// refund gives back the operation counted at t (it made no call).
func (w *window) refund(t time.Time) {
	for i := len(w.takes) - 1; i >= 0; i-- {
		if w.takes[i].Equal(t) {
			w.takes = slices.Delete(w.takes, i, i+1)
			return
		}
	}
}

// emptied fills the window as a platform's token bucket is after it
// refused an op: spent, its slots coming free one steady interval (Per/N)
// apart from the end of the retry_after pause on.
func (w *window) emptied(now time.Time, retryAfter time.Duration) {
	steady := w.rate.Per / time.Duration(w.rate.N)
	w.takes = w.takes[:0]
	for k := range w.rate.N {
		w.takes = append(w.takes, now.Add(retryAfter-w.rate.Per+time.Duration(k)*steady))
	}
}

// expire forgets operations that left the window.
func (w *window) expire(now time.Time) {
	i := 0
	for i < len(w.takes) && !now.Before(w.takes[i].Add(w.rate.Per)) {
		i++
	}
	if i > 0 {
		w.takes = slices.Delete(w.takes, 0, i)
	}
}

// idle reports whether the window counts nothing any more, so its state
// can be dropped.
func (w *window) idle(now time.Time) bool {
	w.expire(now)
	return len(w.takes) == 0 && !w.heldAll.After(now) && !w.heldOthers.After(now)
}
