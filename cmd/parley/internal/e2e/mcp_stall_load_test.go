package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMCPStalledStreamsLoad is a load command, not a unit test: it starts
// `parley serve` as its own process, opens PARLEY_MCP_LOAD_STREAMS (200)
// subscribed 2025-11-25 GET /mcp streams that never read, has people write
// 16 KiB messages that every one of them is notified of, and reports the
// daemon's RSS, Go heap and goroutines before, at the peak and after, and
// how many of the streams the daemon closed.
//
//	PARLEY_MCP_LOAD=1 go test -count=1 -v -run TestMCPStalledStreamsLoad ./cmd/parley/internal/e2e
//
// PARLEY_MCP_LOAD_BIN runs another parley binary instead of building this
// one (to compare with an older build).
func TestMCPStalledStreamsLoad(t *testing.T) {
	if os.Getenv("PARLEY_MCP_LOAD") == "" {
		t.Skip("a load command: set PARLEY_MCP_LOAD=1")
	}
	streams := 200
	if n, err := strconv.Atoi(os.Getenv("PARLEY_MCP_LOAD_STREAMS")); err == nil && n > 0 {
		streams = n
	}
	dir := t.TempDir()
	base, cmd := startLoadServe(t, dir, "PARLEY_MCP_LOAD_BIN")
	addr := strings.TrimPrefix(base, "http://")
	hc := &http.Client{Timeout: 30 * time.Second}
	rpc := func(sid, body string) (string, string) {
		req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header.Get("Mcp-Session-Id"), string(b)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}`
	agent := func() string {
		sid, body := rpc("", initialize)
		if sid == "" {
			t.Fatalf("initialize: %s", body)
		}
		rpc(sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		return sid
	}
	writer := agent()
	_, body := rpc(writer, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"session.create","arguments":{"title":"load"}}}`)
	var created struct {
		Result struct {
			StructuredContent struct {
				SessionID string `json:"session_id"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if i := strings.Index(body, "{"); i >= 0 {
		body = body[i:]
	}
	body = strings.TrimPrefix(body, "data: ")
	if err := json.Unmarshal([]byte(firstJSON(body)), &created); err != nil || created.Result.StructuredContent.SessionID == "" {
		t.Fatalf("session.create: %v %s", err, body)
	}
	session := created.Result.StructuredContent.SessionID

	report := func(when string) {
		t.Logf("%-28s fds %4d  RSS %6.1f MB  heap in use %6.1f MB  goroutines %5.0f  MCP agents %4.0f  subscribers %4.0f", when,
			fds(cmd.Process.Pid), rss(t, cmd.Process.Pid)/(1<<20), daemonMetric(t, base, "go_memstats_heap_inuse_bytes")/(1<<20), daemonMetric(t, base, "go_goroutines"),
			daemonMetric(t, base, "parley_mcp_agents"), daemonMetric(t, base, "parley_mcp_subscribers"))
	}
	report("before")

	// The stalled clients: subscribed, with a GET stream they never read
	// from a socket with a small receive buffer.
	conns := make([]net.Conn, 0, streams)
	for range streams {
		sid := agent()
		rpc(sid, `{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"ui://chat/inbox"}}`)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET /mcp HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\nMcp-Session-Id: %s\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n", addr, sid)
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	report(fmt.Sprintf("%d stalled streams open", streams))

	// People write: every stalled subscriber is notified of each message.
	text := strings.Repeat("all work and no play ", 16<<10/21)
	start := time.Now()
	for i := range 100 {
		args, _ := json.Marshal(map[string]any{"session_id": session, "content": fmt.Sprintf("%d %s", i, text)})
		rpc(writer, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"chat.human.post","arguments":`+string(args)+`}}`)
	}
	time.Sleep(2 * time.Second)
	report("after 100 × 16 KiB messages")

	// The writer keeps its own session alive the way a reading client does.
	for time.Since(start) < 45*time.Second {
		time.Sleep(5 * time.Second)
		rpc(writer, `{"jsonrpc":"2.0","id":5,"method":"ping"}`)
	}
	report("45 s later")

	// How many did the daemon close? Drain each socket and poke it: a
	// closed one ends, or (when the kernel dropped the daemon's orphaned
	// socket while the window was shut) answers the poke with a reset.
	var closed int
	var sample error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
			_, err := io.Copy(io.Discard, c)
			if err != nil {
				_, _ = c.Write([]byte("\r\n"))
				_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
				_, err = io.Copy(io.Discard, c)
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil || strings.Contains(err.Error(), "connection reset") {
				closed++
			} else {
				sample = err
			}
		}()
	}
	wg.Wait()
	t.Logf("%d of %d stalled streams closed by the daemon after 45 s (still open: %v)", closed, streams, sample)
	report("after draining")
	// Freed memory shows once a GC ran: the runtime forces one every two
	// minutes when nothing else triggers it.
	time.Sleep(150*time.Second - time.Since(start))
	report("150 s later (after a GC)")
}

// firstJSON is the first JSON value of an SSE or JSON body.
func firstJSON(body string) string {
	for line := range strings.SplitSeq(body, "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			return d
		}
	}
	return body
}

// fds is the number of files process pid has open.
func fds(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

// rss is process pid's resident set, in bytes.
func rss(t *testing.T, pid int) float64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

// daemonMetric reads one unlabelled value from the daemon's /metrics.
func daemonMetric(t *testing.T, base, name string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, _ := strconv.ParseFloat(rest, 64)
			return v
		}
	}
	return -1
}
