package matrixtest

import "time"

// Bucket is the arithmetic of a Synapse-like rate limit: Rate actions per
// second on average, with bursts of up to Burst actions after a quiet
// period. It is the leaky bucket of Synapse's Ratelimiter, written as the
// equivalent generic cell rate algorithm on integer durations so that it is
// exact: the bucket remembers when it will next be empty ("tat"), each
// action pushes that point one interval (1/Rate) further, and an action is
// refused while the bucket would then hold more than Burst actions.
//
// Bucket takes the time as an argument rather than reading a clock, so
// its behaviour is a pure function of the times it is given. The zero value
// is not usable: set Rate and Burst. It is not safe for concurrent use.
type Bucket struct {
	// Rate is the sustained number of actions per second (Synapse's
	// per_second); it must be positive.
	Rate float64
	// Burst is how many actions may come at once after a quiet period
	// (Synapse's burst_count); it must be at least 1.
	Burst int

	tat time.Time // when the bucket is empty again; zero before any action
}

// Interval is the time one action occupies in the bucket: 1/Rate.
func (b *Bucket) Interval() time.Duration {
	return time.Duration(float64(time.Second) / b.Rate)
}

// Take records one action at now when the limit allows it and reports true.
// Otherwise it records nothing and reports false with how long after now
// the action would be allowed — what Synapse answers as retry_after_ms.
func (b *Bucket) Take(now time.Time) (ok bool, retryAfter time.Duration) {
	interval := b.Interval()
	tolerance := time.Duration(b.Burst-1) * interval
	tat := b.tat
	if tat.Before(now) {
		tat = now
	}
	if wait := tat.Sub(now) - tolerance; wait > 0 {
		return false, wait
	}
	b.tat = tat.Add(interval)
	return true, 0
}
