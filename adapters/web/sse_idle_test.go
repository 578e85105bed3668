//go:build unix

package web_test

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// TestSSEIdleStreamsClosed: 400 /api/events clients that never read —
// raw TCP connections with a 4 KiB receive buffer — while nothing is
// posted at all. Their systems acknowledge the pings, so no write of
// theirs ever blocks: before streams had a lifetime they stayed open for
// good, holding about 35 KiB each. Now each ends at its lifetime (3 s
// here, 25 s by default; cmd/parley/internal/e2e's
// TestWebIdleStreamsEndWithinLifetime has the default on a fake clock):
// the daemon closes every connection, the clients see the end, and the
// heap is back within 10 % of what it was before they connected.
//
// The streams need not all be open at once for that (their lifetimes run
// from when each opened); how many were is logged, and the time they took
// to close, which mostly measures how long the 400 took to open.
func TestSSEIdleStreamsClosed(t *testing.T) {
	const streams = 400
	idle := newNonReaders(streams)
	s := newStack(t, func(o *stackOptions) {
		o.web.StreamLifetime = 3 * time.Second
		o.connState = idle.connState
	})
	id := s.newSession("idle")
	// A client that reads first: what a stream builds once is there
	// before the baseline.
	reader := s.sse("?ui=delta", "")
	s.chat(id, "before the idle clients")
	for reader.next(wait).Event != string(core.EventHumanMessage) {
	}
	reader.close()
	waitClients(t, s, 0, wait)
	s.idle()
	before := liveHeap()

	defer idle.close()
	began := time.Now()
	idle.open(t, s, "?ui=delta")
	opened := time.Since(began)
	peak, open := liveHeap(), s.web.SSEClients()
	idle.awaitClosed(t, s)
	t.Logf("%d idle streams opened in %s (%d open at once at the end), all closed %s after the first",
		streams, opened.Round(time.Millisecond), open, time.Since(began).Round(time.Millisecond))
	waitClients(t, s, 0, wait)

	// Their clients see the end: the stream, its reconnect message, the
	// close.
	got, errs := idle.drain(t)
	reset := 0
	for i, err := range errs {
		switch {
		case errors.Is(err, syscall.ECONNRESET):
			reset++
		case err != nil:
			t.Errorf("a stream ended with %v", err)
		case !strings.Contains(string(got[i]), "event: reconnect"):
			t.Errorf("a stream closed in good order without a reconnect message: %q", got[i])
		}
	}
	t.Logf("%d closed in good order, %d reset", streams-reset, reset)
	idle.close()
	after := liveHeap()
	t.Logf("live heap: %.1f MiB before, %.1f MiB with the idle streams, %.1f MiB after", mib(before), mib(peak), mib(after))
	if float64(after) > 1.1*float64(before) {
		t.Errorf("live heap %d bytes after the streams closed, more than 10%% over the %d before", after, before)
	}
}
