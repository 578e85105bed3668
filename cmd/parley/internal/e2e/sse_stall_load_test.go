//go:build unix

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestSSEStalledStreamsLoad is a load command, not a unit test: it starts
// `parley serve` as its own process and, twice, opens
// PARLEY_SSE_LOAD_STREAMS (400) GET /api/events streams that never read,
// from sockets with a 4 KiB receive buffer:
//
//   - idle: nothing is posted. Each stream ends at its lifetime (25 s) and
//     the daemon closes its connection.
//   - stalled: at once a person posts 32 messages of 8 KiB that every
//     stream is sent (about 512 KiB each, with the page's UiUpdates), so
//     each stream's writes block until their deadline (10 s) cuts it off.
//
// For each it reports the daemon's RSS, Go heap, open files and goroutines
// before, with the streams open and once two GCs ran after they closed, when
// the daemon had closed them all (from the first connection, or the first
// message), and how many of the connections their clients saw closed.
//
//	PARLEY_SSE_LOAD=1 go test -count=1 -v -timeout 30m -run TestSSEStalledStreamsLoad ./cmd/parley/internal/e2e
//
// PARLEY_SSE_LOAD_BIN runs another parley binary instead of building this
// one (to compare with an older build).
func TestSSEStalledStreamsLoad(t *testing.T) {
	if os.Getenv("PARLEY_SSE_LOAD") == "" {
		t.Skip("a load command: set PARLEY_SSE_LOAD=1")
	}
	streams := 400
	if n, err := strconv.Atoi(os.Getenv("PARLEY_SSE_LOAD_STREAMS")); err == nil && n > 0 {
		streams = n
	}
	dir := t.TempDir()
	base, cmd := startLoadServe(t, dir, "PARLEY_SSE_LOAD_BIN")
	addr := strings.TrimPrefix(base, "http://")
	hc := &http.Client{Timeout: 30 * time.Second}
	post := func(path string, body any) map[string]any {
		b, _ := json.Marshal(body)
		resp, err := hc.Post(base+path, "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
		}
		return out
	}
	session := post("/api/sessions", map[string]string{"title": "load"})["id"].(string)

	report := func(when string) {
		t.Logf("%-40s fds %4d  RSS %6.1f MB  heap in use %6.1f MB, allocated %6.1f MB  goroutines %5.0f  SSE clients %4.0f", when,
			fds(cmd.Process.Pid), rss(t, cmd.Process.Pid)/(1<<20), daemonMetric(t, base, "go_memstats_heap_inuse_bytes")/(1<<20),
			daemonMetric(t, base, "go_memstats_heap_alloc_bytes")/(1<<20),
			daemonMetric(t, base, "go_goroutines"), daemonMetric(t, base, "parley_sse_clients"))
	}
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	// open connects the streams that never read.
	open := func() []net.Conn {
		conns := make([]net.Conn, 0, streams)
		for range streams {
			c, err := dialer.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "GET /api/events?ui=delta HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", addr)
			conns = append(conns, c)
		}
		return conns
	}
	// closing waits, a minute at most, until the daemon has no stream, and
	// says how long after start that was.
	closing := func(start time.Time, what string) time.Time {
		for time.Since(start) < time.Minute {
			if daemonMetric(t, base, "parley_sse_clients") == 0 {
				t.Logf("every stream closed %s after %s", time.Since(start).Round(100*time.Millisecond), what)
				return time.Now()
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("streams still open a minute after %s", what)
		return time.Now()
	}
	// seen drains each socket and counts those whose connection the
	// daemon closed: they end, or answer with a reset.
	seen := func(conns []net.Conn) {
		var closed, reset int
		var sample error
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() {
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				_, err := io.Copy(io.Discard, c)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					closed++
				case errors.Is(err, syscall.ECONNRESET):
					closed++
					reset++
				default:
					sample = err
				}
			})
		}
		wg.Wait()
		t.Logf("%d of %d streams closed by the daemon, %d of them reset (still open: %v)", closed, streams, reset, sample)
		for _, c := range conns {
			c.Close()
		}
	}
	// collected waits until the daemon ran two GCs after since: the first
	// moves sync.Pool's contents (net/http's buffers of the closed
	// connections, 8 KiB each) to its victim cache, the second frees
	// them. The runtime forces one every two minutes when nothing else
	// triggers it.
	collected := func(since time.Time) {
		after := float64(since.Unix() + 1)
		for range 2 {
			for start := time.Now(); time.Since(start) < 150*time.Second; time.Sleep(time.Second) {
				if last := daemonMetric(t, base, "go_memstats_last_gc_time_seconds"); last >= after {
					after = last + 0.001
					break
				}
			}
		}
	}

	report("before")
	began := time.Now()
	conns := open()
	report(fmt.Sprintf("%d idle streams open", streams))
	time.Sleep(20 * time.Second)
	report(fmt.Sprintf("%d idle streams open 20 s", streams))
	done := closing(began, "the first idle stream connected")
	seen(conns)
	collected(done)
	report("idle streams closed (after 2 GCs)")

	conns = open()
	report(fmt.Sprintf("%d stalled streams open", streams))
	text := strings.Repeat("nobody reads this. ", 8<<10/19)
	start := time.Now()
	for i := range 32 {
		post("/api/chat", map[string]string{"session_id": session, "text": fmt.Sprintf("%d %s", i, text)})
	}
	report("after 32 × 8 KiB messages")
	done = closing(start, "the first message")
	seen(conns)
	collected(done)
	report("stalled streams closed (after 2 GCs)")
}
