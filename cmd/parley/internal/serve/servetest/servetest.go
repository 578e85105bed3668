// Package servetest runs a parley daemon in a test's own process: a
// serve.Main opened and run in the background and stopped when the test
// ends, the wait for its platforms' first start, and the probes a test
// makes of it from outside (GET /api/health) — what the command's tests
// and the end-to-end harness both need, written once.
//
// A stop at the end of a test holds the outbox first (HoldOutbox): nothing
// is asserted then, and draining would only wait out the platforms'
// pacing. A stop inside a test (a restart) drains, as a person's
// `parley serve` does.
package servetest

import (
	"context"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/platform"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/core"
)

// Launch opens m and runs it in the background. The returned stop ends
// the run and closes m, returning Run's and Close's errors; calling it
// again returns nothing.
func Launch(tb testing.TB, m *serve.Main) (stop func() (runErr, closeErr error)) {
	tb.Helper()
	if err := m.Open(context.Background()); err != nil {
		tb.Fatalf("parley did not start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	return func() (error, error) {
		if stopped {
			return nil, nil
		}
		stopped = true
		cancel()
		return <-done, m.Close()
	}
}

// Serve opens m and runs it until the test ends, then stops it with its
// outbox held (FinalStop) and reports Run's and Close's errors to tb.
func Serve(tb testing.TB, m *serve.Main) *serve.Main {
	tb.Helper()
	stop := Launch(tb, m)
	tb.Cleanup(FinalStop(m, func() {
		runErr, closeErr := stop()
		if runErr != nil {
			tb.Errorf("run: %v", runErr)
		}
		if closeErr != nil {
			tb.Errorf("close: %v", closeErr)
		}
	}))
	return m
}

// Start serves a Main on cfg with the platforms of table until the test
// ends (Serve) and waits for their first start (AwaitStarted).
func Start(tb testing.TB, cfg config.Config, table []platform.Platform) *serve.Main {
	tb.Helper()
	m := Serve(tb, &serve.Main{Config: cfg, Platforms: table})
	AwaitStarted(tb, m)
	return m
}

// AwaitStarted waits until the first start of every platform m runs has
// finished, up or not: the daemon starts platforms in the background
// (supervised, so that one that is down does not keep the rest from
// serving), and a test that looks at what a platform's start does (its
// commands registered) or that sends as soon as Run returned must wait
// for it as a person would wait for the bot to come online.
func AwaitStarted(tb testing.TB, m *serve.Main) {
	tb.Helper()
	PollUntil(tb, 60*time.Second, "the platforms' first start", func() bool {
		for _, s := range m.Daemon().Health().Platforms() {
			if s.State == core.PlatformStarting {
				return false
			}
		}
		return true
	}, nil)
}

// HoldOutbox holds every platform's operations in m's outbox (see
// delivery.Outbox.Hold), so that the stop at the end of a test does not
// drain them: no assertion looks at what is still queued then, and the
// drain would wait out the platforms' pacing and a turn's held tidy-up (up
// to 3 s a daemon). Held operations stay journaled, as when a platform is
// down at shutdown.
func HoldOutbox(m *serve.Main) {
	if m == nil || m.Daemon() == nil {
		return
	}
	for name := range m.Daemon().Health().Platforms() {
		m.Daemon().Outbox.Hold(name, true)
	}
}

// FinalStop is stop for t.Cleanup: it holds m's outbox first.
func FinalStop(m *serve.Main, stop func()) func() {
	return func() {
		HoldOutbox(m)
		stop()
	}
}

// PollUntil checks cond every 100ms until it holds, and fails the test
// after timeout, or as soon as stop (if set) has a reason to give.
func PollUntil(tb testing.TB, timeout time.Duration, what string, cond func() bool, stop func() string) {
	tb.Helper()
	PollEvery(tb, 100*time.Millisecond, timeout, what, cond, stop)
}

// PollEvery is PollUntil checking every period: on a fake clock, where
// waiting costs nothing but each check costs real time, a test that waits
// out minutes of pacing checks less often.
func PollEvery(tb testing.TB, period, timeout time.Duration, what string, cond func() bool, stop func() string) {
	tb.Helper()
	deadline := time.After(timeout)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for !cond() {
		if stop != nil {
			if why := stop(); why != "" {
				tb.Fatalf("waiting for %s: %s", what, why)
			}
		}
		select {
		case <-deadline:
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}
