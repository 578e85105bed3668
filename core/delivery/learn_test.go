package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// homeserver is a platform for the learning tests: it accepts everything,
// or with a limit answers like Synapse's rc_message — a token bucket per
// account (rate per second, bursts of burst), a refused call counted for
// nothing and answered with the time until it would be allowed — and it
// records every call with the time it came.
type homeserver struct {
	rate  float64 // per second; 0: no limit
	burst int

	mu    sync.Mutex
	tat   time.Time // when the bucket is empty again
	calls []hsCall
	// A call after refusedAt (a later instant: on the fake clock, calls
	// at the same instant were made together, before parley could know)
	// and before pausedT ignored a retry_after; early lists them.
	refusedAt, pausedT time.Time
	early              []string
}

type hsCall struct {
	at      time.Time
	kind    core.OpKind
	text    string
	limited bool
}

func (h *homeserver) call(kind core.OpKind, text string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now()
	if now.After(h.refusedAt) && now.Before(h.pausedT) {
		h.early = append(h.early, fmt.Sprintf("%s at %v before %v", text, now, h.pausedT))
	}
	if h.rate > 0 {
		interval := time.Duration(float64(time.Second) / h.rate)
		tat := h.tat
		if tat.Before(now) {
			tat = now
		}
		if wait := tat.Sub(now) - time.Duration(h.burst-1)*interval; wait > 0 {
			h.calls = append(h.calls, hsCall{at: now, kind: kind, text: text, limited: true})
			h.refusedAt, h.pausedT = now, now.Add(wait)
			return &core.RateLimitError{RetryAfter: wait, Scope: core.ScopeAccount, Err: errors.New("M_LIMIT_EXCEEDED")}
		}
		h.tat = tat.Add(interval)
	}
	h.calls = append(h.calls, hsCall{at: now, kind: kind, text: text})
	return nil
}

func (h *homeserver) log() []hsCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hsCall(nil), h.calls...)
}

// learner is an adapter declaring Matrix-like limits: one account budget
// that learns, with a share kept for new messages.
type learner struct{ caps core.Capabilities }

func (l learner) Name() core.AdapterName                        { return "hs" }
func (l learner) Capabilities() core.Capabilities               { return l.caps }
func (l learner) Run(ctx context.Context, _ core.Handler) error { <-ctx.Done(); return nil }
func (l learner) Send(context.Context, core.Place, core.OutMessage) (core.MessageRef, error) {
	return core.MessageRef{}, nil
}

// synapseBudget is Synapse's default rc_message as parley's starting
// budget: 5 per 25 s (half the burst over the time it refills).
var synapseBudget = core.Rate{N: 5, Per: 25 * time.Second}

func learnerCaps(share float64) core.Capabilities {
	return core.Capabilities{
		EditInterval: time.Second,
		Limits: []core.Limit{{Scope: core.ScopeAccount, Rate: synapseBudget, SendShare: share,
			Learn: &core.Learn{Max: core.Rate{N: 10, Per: time.Second}, Every: 2 * time.Second}}},
	}
}

// stream is an agent streaming into one output message of room: an update
// every 150 ms for d, then the final text; it returns when the final text
// was enqueued, and the time it was.
func stream(o *delivery.Outbox, h *homeserver, room string, d time.Duration) time.Time {
	place := core.Place{Chat: room}
	edit := func(text string) {
		o.Enqueue(core.Op{Kind: core.OpEdit, Adapter: "hs", Place: place, Key: "out " + room,
			Run: func(context.Context, core.Place) error { return h.call(core.OpEdit, text) }})
	}
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		edit(fmt.Sprintf("%s step %d", room, i))
		time.Sleep(150 * time.Millisecond)
	}
	edit(room + " final")
	return time.Now()
}

// answer enqueues a message for people and returns a function that waits
// for it and says how long after the enqueue it was accepted.
func answer(o *delivery.Outbox, h *homeserver, room, text string) func() time.Duration {
	at := time.Now()
	done := make(chan time.Duration, 1)
	o.Enqueue(core.Op{Kind: core.OpSend, Adapter: "hs", Place: core.Place{Chat: room},
		Run: func(context.Context, core.Place) error { return h.call(core.OpSend, text) },
		Done: func(err error) {
			if err != nil {
				panic(err)
			}
			done <- time.Since(at)
		}})
	return func() time.Duration { return <-done }
}

// shownAt is when the platform accepted text.
func shownAt(t *testing.T, h *homeserver, text string) time.Time {
	t.Helper()
	for _, c := range h.log() {
		if c.text == text && !c.limited {
			return c.at
		}
	}
	t.Fatalf("%q never accepted", text)
	return time.Time{}
}

// TestOutboxLearnsAGenerousHomeserver: a homeserver without limits is not
// held to Synapse's budget. A lone stream starts at Synapse's steady rate
// (an edit every 5 s) and, growing by 5 per 25 s every 2 s of use, edits
// at the adapter's one second within 20 s; its final text is shown within
// a second of the agent's; an answer right after a stream goes at once.
func TestOutboxLearnsAGenerousHomeserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &homeserver{}
		o := delivery.NewOutbox(delivery.OutboxOptions{Jitter: func() float64 { return 0 }}, learner{learnerCaps(0.25)})
		defer o.Close()
		start := time.Now()
		final := stream(o, h, "!a", 30*time.Second)
		drain(t, o)
		if lag := shownAt(t, h, "!a final").Sub(final); lag > time.Second {
			t.Errorf("final text shown %v after the agent's, want ≤ 1s", lag)
		}
		var edits []time.Duration
		for _, c := range h.log() {
			edits = append(edits, c.at.Sub(start))
		}
		if len(edits) < 2 || edits[1]-edits[0] < 2*time.Second {
			t.Fatalf("edits at %v: the first two should be about Synapse's steady 5 s apart, less one growth step", edits)
		}
		for i := 1; i < len(edits); i++ {
			if gap := edits[i] - edits[i-1]; edits[i] > 10*time.Second && gap > time.Second {
				t.Errorf("edit at +%v came %v after the previous one; by then the budget should allow one a second", edits[i], gap)
			}
		}
		if got := answer(o, h, "!a", "!status answer")(); got != 0 {
			t.Errorf("answer after the stream waited %v", got)
		}
	})
}

// TestOutboxFollowsASynapseHomeserver: against Synapse's default
// rc_message the budget grows until the homeserver says
// M_LIMIT_EXCEEDED once (to the calls in flight at that instant), every
// retry_after is honoured, the budget drops to what the homeserver
// accepted, and from then on it is followed: no further M_LIMIT_EXCEEDED
// in ten minutes of five rooms streaming, and every answer for people is
// accepted within 5 s.
func TestOutboxFollowsASynapseHomeserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &homeserver{rate: 0.2, burst: 10}
		o := delivery.NewOutbox(delivery.OutboxOptions{Jitter: func() float64 { return 0 }}, learner{learnerCaps(0.25)})
		defer o.Close()
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() { stream(o, h, fmt.Sprintf("!r%d", i), 10*time.Minute) })
		}
		var waits []func() time.Duration
		for i := range 20 {
			time.Sleep(29 * time.Second)
			waits = append(waits, answer(o, h, fmt.Sprintf("!r%d", i%5), fmt.Sprintf("answer %d", i)))
		}
		wg.Wait()
		drain(t, o)
		for i, w := range waits {
			if got := w(); got > 5*time.Second {
				t.Errorf("answer %d waited %v, want ≤ 5s", i, got)
			}
		}
		var limited []time.Time
		for _, c := range h.log() {
			if c.limited {
				limited = append(limited, c.at)
			}
		}
		// The calls in flight together when the homeserver first refused
		// are refused together (here 2); after that, none.
		if len(limited) == 0 || len(limited) > 5 || !limited[len(limited)-1].Equal(limited[0]) {
			t.Errorf("M_LIMIT_EXCEEDED at %v; want those of one instant, the one it takes to learn", limited)
		}
		if len(h.early) > 0 {
			t.Errorf("retry_after not honoured: %v", h.early)
		}
	})
}

// TestOutboxGrowsOnlyABudgetInUse: ops that never wait for the budget do
// not make it grow. After ten minutes of a trickle, a burst gets the
// starting budget and one growth step at once (the burst itself waits for
// the budget), then a step every 2 s — not the Max it would have reached
// had the trickle counted.
func TestOutboxGrowsOnlyABudgetInUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &homeserver{}
		o := delivery.NewOutbox(delivery.OutboxOptions{Jitter: func() float64 { return 0 }}, learner{learnerCaps(0)})
		defer o.Close()
		for i := range 60 {
			answer(o, h, "!a", fmt.Sprint("trickle ", i))()
			time.Sleep(10 * time.Second)
		}
		time.Sleep(25 * time.Second) // the window is empty again
		start := time.Now()
		for i := range 30 {
			answer(o, h, "!a", fmt.Sprint("burst ", i))
		}
		drain(t, o)
		at := map[time.Duration]int{}
		for _, c := range h.log() {
			if !c.at.Before(start) {
				at[c.at.Sub(start)]++
			}
		}
		want := map[time.Duration]int{0: 10, 2 * time.Second: 5, 4 * time.Second: 5, 6 * time.Second: 5, 8 * time.Second: 5}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Errorf("the burst went %v (after +0s: count), want %v", at, want)
		}
	})
}

// TestOutboxKeepsAShareForSends: edits, final outputs at send priority
// included, may not take the budget's last slots; a message for people
// finds one free while edits wait. Without the
// share, the message waits for the window like the edits.
func TestOutboxKeepsAShareForSends(t *testing.T) {
	for _, tc := range []struct {
		share float64
		final bool // the edits are final outputs, queued at send priority
		wait  time.Duration
	}{{0.25, false, 0}, {0, false, 25 * time.Second}, {0.25, true, 0}} {
		t.Run(fmt.Sprint("share=", tc.share, "/final=", tc.final), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := &homeserver{}
				caps := core.Capabilities{Limits: []core.Limit{{Scope: core.ScopeAccount, Rate: synapseBudget, SendShare: tc.share}}}
				o := delivery.NewOutbox(delivery.OutboxOptions{Jitter: func() float64 { return 0 }}, learner{caps})
				defer o.Close()
				for i := range 8 {
					room := fmt.Sprint("!r", i)
					op := core.Op{Kind: core.OpEdit, Adapter: "hs", Place: core.Place{Chat: room}, Key: room,
						Run: func(context.Context, core.Place) error { return h.call(core.OpEdit, room) }}
					if tc.final {
						op.Kind, op.Calls = core.OpSend, []core.OpKind{core.OpEdit}
					}
					o.Enqueue(op)
				}
				synctest.Wait()
				if got := len(h.log()); got != synapseBudget.N-int(tc.share*float64(synapseBudget.N)) {
					t.Errorf("%d edits ran at once", got)
				}
				if got := answer(o, h, "!r0", "answer")(); got != tc.wait {
					t.Errorf("the answer waited %v, want %v", got, tc.wait)
				}
				drain(t, o)
			})
		})
	}
}

// TestOutboxFollowsAStricterHomeserver: a homeserver stricter than the
// starting budget (0.1 a second, bursts of 3) refuses even that; each
// refusal halves the budget, every retry_after is honoured, and once the
// budget fits, the homeserver refuses nothing more: none in the last five
// of ten minutes of streaming.
func TestOutboxFollowsAStricterHomeserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := &homeserver{rate: 0.1, burst: 3}
		o := delivery.NewOutbox(delivery.OutboxOptions{Jitter: func() float64 { return 0 }}, learner{learnerCaps(0.25)})
		defer o.Close()
		start := time.Now()
		stream(o, h, "!a", 10*time.Minute)
		drain(t, o)
		var limited []time.Duration
		for _, c := range h.log() {
			if c.limited {
				limited = append(limited, c.at.Sub(start))
			}
		}
		t.Logf("M_LIMIT_EXCEEDED at %v", limited)
		if len(limited) == 0 || len(limited) > 3 || limited[len(limited)-1] > 5*time.Minute {
			t.Errorf("M_LIMIT_EXCEEDED at %v; want a few, none in the last five minutes", limited)
		}
		if len(h.early) > 0 {
			t.Errorf("retry_after not honoured: %v", h.early)
		}
	})
}
