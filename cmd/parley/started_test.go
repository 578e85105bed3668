package main

import (
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
