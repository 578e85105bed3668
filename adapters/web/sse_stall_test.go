//go:build unix

package web_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// TestSSEStalledStreamsClosed: 400 /api/events clients that never read —
// raw TCP connections whose receive buffer is set to 4 KiB before they
// connect, so that it bounds the window they offer — are each sent about
// 256 KiB of events. That is more than the daemon lets wait for one
// stream (httpguard.StreamSendBuffer, doubled by the kernel, and what the
// client's buffer takes), so each stream's write blocks until its
// deadline cuts the client off (1 s here, WriteTimeout; 10 s by default),
// and the connection is reset. Every connection is closed, and the heap is
// back within 10 % of what it was before they connected. Before the send
// buffer was bounded, the kernel took the 256 KiB for most of them and
// their streams stayed open, idle, for good.
//
// How long the closing takes is the time to produce those bytes plus the
// deadline, which on a loaded machine under the race detector is mostly
// the former: the wait below only guards against a hang, and the time is
// logged. TestSSEStalledStreamsLoad (cmd/parley/internal/e2e) measures it
// on a real daemon with its default deadline.
//
// The heap is measured in-process, after forced collections, as its live
// bytes (HeapAlloc): that counts what the streams held and is
// deterministic, where a process's RSS depends on when the runtime returns
// pages to the system.
func TestSSEStalledStreamsClosed(t *testing.T) {
	const streams = 400
	stalled := newNonReaders(streams)
	s := newStack(t, func(o *stackOptions) {
		o.web.WriteTimeout = time.Second
		o.web.StreamLifetime = time.Hour // the deadline ends them, not the lifetime
		o.connState = stalled.connState
	})
	id := s.newSession("stalled")
	s.snapshot(id) // the session's UiState in memory: its events carry deltas
	text := strings.Repeat("nobody reads this. ", 8<<10/19)
	post := func(n int) {
		for i := range n {
			if _, err := s.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id,
				Origin: core.OriginAPI, Text: fmt.Sprintf("%d %s", i, text)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A client that reads, first: what a stream builds once (net/http's
	// pools, the encoders' caches) is there before the baseline, and the
	// session holds as many messages as it will hold more after it.
	reader := s.sse("?ui=delta", "")
	post(16)
	for range 16 {
		for reader.next(wait).Event != string(core.EventHumanMessage) {
		}
	}
	reader.close()
	waitClients(t, s, 0, wait)
	s.idle()
	before := liveHeap()

	defer stalled.close()
	stalled.open(t, s, "?ui=delta")
	waitClients(t, s, streams, time.Minute)
	peak := liveHeap()

	began := time.Now()
	post(16) // a 16 KiB event each (the message, and its UiUpdate)
	stalled.awaitClosed(t, s)
	t.Logf("%d streams that never read closed %s after their events", streams, time.Since(began).Round(time.Millisecond))
	waitClients(t, s, 0, wait)

	// Their clients see the end: after what their buffer holds, the reset.
	stalled.drain(t)
	stalled.close()
	after := liveHeap()
	t.Logf("live heap: %.1f MiB before, %.1f MiB with %d idle streams, %.1f MiB after", mib(before), mib(peak), streams, mib(after))
	if float64(after) > 1.1*float64(before) {
		t.Errorf("live heap %d bytes after the streams closed, more than 10%% over the %d before", after, before)
	}
}

// TestSSECutClientResumes: a client cut off for not reading has its
// connection reset, and loses nothing. Whatever reached it before the
// reset it has; reconnecting with the id of the last whole event it has
// (Last-Event-ID, as EventSource does) brings every later event once, in
// order.
func TestSSECutClientResumes(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.web.WriteTimeout = 300 * time.Millisecond
		o.web.StreamLifetime = time.Hour // the deadline ends it, not the lifetime
	})
	id := s.newSession("cut")
	start, err := s.store.LastEventSeq(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c, err := smallReceiver().Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /api/events HTTP/1.1\r\nHost: %s\r\n\r\n", s.srv.Listener.Addr())
	waitClients(t, s, 1, wait)
	text := strings.Repeat("read me later. ", 8<<10/15)
	for i := range 32 {
		s.chat(id, fmt.Sprintf("%d %s", i, text))
	}
	waitClients(t, s, 0, time.Minute)

	// What reached the client: the events up to the last whole one.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	raw, err := io.ReadAll(c)
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("the connection ended with %v, not reset: the kernel sent on what the client did not take", err)
	}
	last := start
	if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil); err == nil {
		body, _ := io.ReadAll(resp.Body) // up to the reset
		frames := strings.Split(string(body), "\n\n")
		for _, f := range frames[:len(frames)-1] { // the last is not whole
			for line := range strings.SplitSeq(f, "\n") {
				if v, ok := strings.CutPrefix(line, "id: "); ok {
					if last, err = strconv.ParseUint(v, 10, 64); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	end, _ := s.store.LastEventSeq(context.Background())
	t.Logf("the cut client had the events up to %d of %d..%d", last, start+1, end)
	if last >= end {
		t.Fatal("the client was sent everything: nothing was cut")
	}
	reader := s.sse("", strconv.FormatUint(last, 10))
	expectLog(t, s, reader, last)
	if !reader.quiet(100 * time.Millisecond) {
		t.Fatal("duplicates after the resume")
	}
}

// nonReaders are raw TCP clients of /api/events that never read, with a
// 4 KiB receive buffer. The server says when it has closed each one's
// connection (known by its address: connState is the server's), so the
// client need not read to find out, which would open its window.
type nonReaders struct {
	mu     sync.Mutex
	mine   map[string]bool
	closed chan struct{}
	conns  []net.Conn
	n      int
}

func newNonReaders(n int) *nonReaders {
	return &nonReaders{mine: map[string]bool{}, closed: make(chan struct{}, n), n: n}
}

// connState is the server's http.Server.ConnState.
func (nr *nonReaders) connState(c net.Conn, st http.ConnState) {
	nr.mu.Lock()
	mine := nr.mine[c.RemoteAddr().String()]
	nr.mu.Unlock()
	if mine && st == http.StateClosed {
		nr.closed <- struct{}{}
	}
}

// open connects them, each asking for /api/events with query.
func (nr *nonReaders) open(t *testing.T, s *stack, query string) {
	t.Helper()
	dialer := smallReceiver()
	addr := s.srv.Listener.Addr().String()
	for range nr.n {
		c, err := dialer.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nr.mu.Lock()
		nr.conns = append(nr.conns, c)
		nr.mine[c.LocalAddr().String()] = true
		nr.mu.Unlock()
		if _, err := fmt.Fprintf(c, "GET /api/events%s HTTP/1.1\r\nHost: %s\r\n\r\n", query, addr); err != nil {
			t.Fatal(err)
		}
	}
}

// awaitClosed waits until the server has closed every connection; two
// minutes guard against a hang.
func (nr *nonReaders) awaitClosed(t *testing.T, s *stack) {
	t.Helper()
	guard := time.After(2 * time.Minute)
	for n := 0; n < nr.n; {
		select {
		case <-nr.closed:
			n++
		case <-guard:
			t.Fatalf("%d of %d connections whose streams are never read still open after 2 minutes (%d streams)",
				nr.n-n, nr.n, s.web.SSEClients())
		}
	}
}

// drain reads each connection to its end, which its client must see: what
// it holds, then the close. It returns what each received and how it
// ended.
func (nr *nonReaders) drain(t *testing.T) (got [][]byte, errs []error) {
	t.Helper()
	got, errs = make([][]byte, len(nr.conns)), make([]error, len(nr.conns))
	var wg sync.WaitGroup
	for i, c := range nr.conns {
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got[i], errs[i] = io.ReadAll(c)
		})
	}
	wg.Wait()
	open := 0
	for _, err := range errs {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			open++
		}
	}
	if open > 0 {
		t.Fatalf("%d connections the server closed are still open for their clients", open)
	}
	return got, errs
}

// close closes the client ends and forgets them.
func (nr *nonReaders) close() {
	nr.mu.Lock()
	defer nr.mu.Unlock()
	for _, c := range nr.conns {
		c.Close()
	}
	nr.conns = nil
}

// smallReceiver dials with a 4 KiB receive buffer, set before connecting
// so that it bounds the window the connection offers.
func smallReceiver() *net.Dialer {
	return &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
}

// waitClients waits until the adapter has n SSE clients.
func waitClients(t *testing.T, s *stack, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for s.web.SSEClients() != n {
		select {
		case <-deadline:
			t.Fatalf("%d SSE clients, want %d", s.web.SSEClients(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// liveHeap is the heap's live bytes after a collection. Two: the first
// moves sync.Pool's contents to its victim cache, the second frees them.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
