package fakeserver

import "time"

// Window is one sliding window a call counts against: at most N calls in
// any span of length Per, counted under Key (a chat, a workspace's
// method, the whole bot).
type Window struct {
	Key string
	N   int
	Per time.Duration
}

// Windows keeps the accepted calls of every window, by key. It is not safe
// for concurrent use: the fake calls it under its own lock.
type Windows struct {
	// Slack is how much earlier than its window allows a call may still
	// pass, absorbing the jitter between a client's pacing clock and the
	// arrival of its requests.
	Slack time.Duration
	calls map[string][]time.Time
}

// Take counts a call at now against every window in ws and returns 0, or,
// when any of them is full, counts it against none and returns how long
// until all of them have room again. A refused call counts nowhere, as a
// platform's 429 does not.
func (w *Windows) Take(now time.Time, ws ...Window) time.Duration {
	if w.calls == nil {
		w.calls = map[string][]time.Time{}
	}
	var wait time.Duration
	for _, win := range ws {
		ts := w.calls[win.Key]
		k := 0
		for k < len(ts) && !ts[k].Add(win.Per-w.Slack).After(now) {
			k++
		}
		ts = ts[k:]
		w.calls[win.Key] = ts
		if len(ts) >= win.N {
			wait = max(wait, ts[len(ts)-win.N].Add(win.Per-w.Slack).Sub(now))
		}
	}
	if wait > 0 {
		return wait
	}
	for _, win := range ws {
		w.calls[win.Key] = append(w.calls[win.Key], now)
	}
	return 0
}
