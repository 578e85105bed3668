package matrixtest

import (
	"testing"
	"time"
)

// Synapse's own unit test of its limiter, at rate 0.1/s and a burst of 1:
// allowed at 0, refused at 5 (allowed again at 10), allowed at 10.
func TestBucketMatchesSynapseRatelimiter(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b := &Bucket{Rate: 0.1, Burst: 1}
	if ok, _ := b.Take(t0); !ok {
		t.Fatal("first action refused")
	}
	ok, wait := b.Take(t0.Add(5 * time.Second))
	if ok || wait != 5*time.Second {
		t.Fatalf("at 5s: ok=%v retry after %v, want refused, 5s", ok, wait)
	}
	if ok, _ := b.Take(t0.Add(10 * time.Second)); !ok {
		t.Fatal("at 10s: refused, want allowed")
	}
}

// Synapse's default rc_message: 0.2/s, bursts of 10. Ten at once pass, the
// eleventh waits one interval (5 s), and the bucket then refills at one
// action per 5 s.
func TestBucketSynapseDefaults(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b := &Bucket{Rate: 0.2, Burst: 10}
	if got := b.Interval(); got != 5*time.Second {
		t.Fatalf("interval %v, want 5s", got)
	}
	for i := range 10 {
		if ok, wait := b.Take(t0); !ok {
			t.Fatalf("action %d of the burst refused (retry after %v)", i+1, wait)
		}
	}
	if ok, wait := b.Take(t0); ok || wait != 5*time.Second {
		t.Fatalf("11th at once: ok=%v retry after %v, want refused, 5s", ok, wait)
	}
	// A refused action is not recorded: asking again later gives the
	// remaining time, not a longer one.
	if ok, wait := b.Take(t0.Add(2 * time.Second)); ok || wait != 3*time.Second {
		t.Fatalf("at 2s: ok=%v retry after %v, want refused, 3s", ok, wait)
	}
	if ok, _ := b.Take(t0.Add(5 * time.Second)); !ok {
		t.Fatal("at 5s: refused, want allowed")
	}
	if ok, wait := b.Take(t0.Add(5 * time.Second)); ok || wait != 5*time.Second {
		t.Fatalf("second at 5s: ok=%v retry after %v, want refused, 5s", ok, wait)
	}
	// After 50 s of quiet the whole burst is available again, and no more.
	later := t0.Add(60 * time.Second)
	for i := range 10 {
		if ok, _ := b.Take(later); !ok {
			t.Fatalf("action %d after the quiet period refused", i+1)
		}
	}
	if ok, wait := b.Take(later); ok || wait != 5*time.Second {
		t.Fatalf("11th after the quiet period: ok=%v retry after %v, want refused, 5s", ok, wait)
	}
}

// Steady traffic at exactly the rate is never refused, however long.
func TestBucketSteadyRate(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	b := &Bucket{Rate: 4, Burst: 1}
	for i := range 1000 {
		if ok, wait := b.Take(t0.Add(time.Duration(i) * 250 * time.Millisecond)); !ok {
			t.Fatalf("action %d refused, retry after %v", i, wait)
		}
	}
}
