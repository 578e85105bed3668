package inbound

import (
	"context"
	"log/slog"
	"time"

	"github.com/parley-chat/parley/core"
)

// The retry backoff: the first wait, doubled after every failure up to the
// last. A Handler that fails (the store busy or broken) is tried again soon,
// then at most every ten seconds, for as long as the update is wanted.
const (
	FirstBackoff = 100 * time.Millisecond
	MaxBackoff   = 10 * time.Second
)

// Retry handles one platform update until it is dealt with. Its zero value
// retries every error, unbounded in time, and logs nothing.
type Retry struct {
	// Log receives a warning for every failed try; nil discards them.
	Log *slog.Logger
	// What names the update in the warnings: "update", "envelope",
	// "sync event" ("update not handled yet; retrying").
	What string
	// Attempt bounds one try (a context deadline); zero does not.
	Attempt time.Duration
	// SkipPermanent ends the retrying when a try fails with an error
	// marked permanent (core.IsPermanent): the platform refused
	// something for good, which retrying cannot change, and the updates
	// after this one must not wait forever. The update then counts as
	// dealt with. Without it such an error is retried like any other.
	SkipPermanent bool
}

// Do calls try until it returns nil, waiting FirstBackoff after the first
// failure and twice as long after each next one, up to MaxBackoff. It
// returns nil once try did (or, with SkipPermanent, once try failed for
// good), and ctx's error when ctx ended first: the update was not dealt
// with and must not be acknowledged. attrs are logged with every warning
// (the update's id).
func (r Retry) Do(ctx context.Context, try func(ctx context.Context) error, attrs ...any) error {
	backoff := FirstBackoff
	for {
		err := r.once(ctx, try)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if r.SkipPermanent && core.IsPermanent(err) {
			r.warn(r.What+" refused for good; skipping it", attrs, "err", err)
			return nil
		}
		r.warn(r.What+" not handled yet; retrying", attrs, "err", err, "in", backoff)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, MaxBackoff)
	}
}

// once is one try, within Attempt.
func (r Retry) once(ctx context.Context, try func(ctx context.Context) error) error {
	if r.Attempt <= 0 {
		return try(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, r.Attempt)
	defer cancel()
	return try(ctx)
}

func (r Retry) warn(msg string, attrs []any, more ...any) {
	if r.Log != nil {
		r.Log.Warn(msg, append(attrs[:len(attrs):len(attrs)], more...)...)
	}
}
