package fakeserver

import (
	"io"
	"math/rand/v2"
	"net"
	"net/http"
)

// Faults decides which calls fail and how, from a seeded generator, so
// that the same seed and the same sequence of calls give the same faults.
// K is the fake's own kind of fault. It is not safe for concurrent use:
// the fake calls it under its own lock.
type Faults[K comparable] struct {
	every   int
	kinds   []K
	outages []K
	exempt  map[string]bool
	rng     *rand.Rand
	// Outage makes every call not exempt fail with one of the outage
	// kinds, as when the platform or the network in front of it is down.
	Outage bool
	// Hanging is how many requests Hang holds right now; the fake updates
	// it through Hang's callbacks.
	Hanging int
}

// NewFaults returns a decider that fails each call with probability
// 1/every (none when every ≤ 0) with one of kinds, chosen uniformly, and
// during an outage with one of outages; methods in exempt (as the fake
// keys them: callers normalise case) never fail.
func NewFaults[K comparable](every int, seed uint64, kinds, outages []K, exempt []string) Faults[K] {
	f := Faults[K]{every: every, kinds: kinds, outages: outages, exempt: map[string]bool{},
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, m := range exempt {
		f.exempt[m] = true
	}
	return f
}

// Pick decides whether a call of method fails, and how.
func (f *Faults[K]) Pick(method string) (kind K, ok bool) {
	switch {
	case f.exempt[method]:
	case f.Outage && len(f.outages) > 0:
		return f.outages[f.rng.IntN(len(f.outages))], true
	case f.every > 0 && len(f.kinds) > 0 && f.rng.IntN(f.every) == 0:
		return f.kinds[f.rng.IntN(len(f.kinds))], true
	}
	return kind, false
}

// IntN draws from the same generator (e.g. a 429's retry_after), so that
// the seed fixes it too.
func (f *Faults[K]) IntN(n int) int { return f.rng.IntN(n) }

// Restart replaces the decision rules by g's, keeping the state of the
// calls in flight (Outage, Hanging).
func (f *Faults[K]) Restart(g Faults[K]) {
	g.Outage, g.Hanging = f.Outage, f.Hanging
	*f = g
}

// Hang holds a request until its client goes away or done closes, then
// drops the connection without an answer. enter and leave run when the
// request starts and stops being held (the fake counts and signals them).
func Hang(w http.ResponseWriter, r *http.Request, done <-chan struct{}, enter, leave func()) {
	// The server notices a closed connection (and cancels the request's
	// context) only once the body has been read to the end.
	_, _ = io.Copy(io.Discard, r.Body)
	enter()
	select {
	case <-r.Context().Done():
	case <-done:
	}
	leave()
	ResetConn(w)
}

// ResetConn closes the request's connection with a TCP reset and no
// answer.
func ResetConn(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler) // closes the connection without answering
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // Close sends RST instead of FIN
	}
	_ = conn.Close()
}
