package main

import (
	"context"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// awaitStarted waits until the first start of every platform m runs has
// finished, up or not: the daemon starts platforms in the background
// (supervised, so that one that is down does not keep the rest from
// serving), and a test that looks at what a platform's start does (its
// commands registered) or that sends as soon as Run returned must wait
// for it as a person would wait for the bot to come online.
func awaitStarted(tb testing.TB, m *Main) {
	tb.Helper()
	pollUntil(tb, 60*time.Second, "the platforms' first start", func() bool {
		for _, s := range m.daemon.Health().Platforms() {
			if s.State == core.PlatformStarting {
				return false
			}
		}
		return true
	}, nil)
}

// serveMain opens m and runs it until the test ends, then stops and closes
// it: the one way the in-process tests start a daemon.
func serveMain(tb testing.TB, m *Main) *Main {
	tb.Helper()
	if err := m.Open(context.Background()); err != nil {
		tb.Fatalf("parley did not start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	tb.Cleanup(func() {
		holdOutbox(m)
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("run: %v", err)
		}
		if err := m.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return m
}

// holdOutbox holds every platform's operations in m's outbox (see
// core.Outbox.Hold), so that the stop at the end of a test does not drain
// them: no assertion looks at what is still queued then, and the drain
// would wait out the platforms' pacing and a turn's held tidy-up (up to
// 3 s a stack). Held operations stay journaled, as when a platform is
// down at shutdown. A stop inside a test (a restart) still drains.
func holdOutbox(m *Main) {
	if m == nil || m.daemon == nil {
		return
	}
	for name := range m.daemon.Health().Platforms() {
		m.daemon.Outbox.Hold(name, true)
	}
}

// finalStop is stop for t.Cleanup: it holds m's outbox first (holdOutbox).
func finalStop(m *Main, stop func()) func() {
	return func() {
		holdOutbox(m)
		stop()
	}
}
