//go:build unix

package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestMCPFanoutLoad is a load command, not a unit test: it serves a real
// parley MCP stack (bbolt, fsynced) on loopback in this process, has a
// child process (this test binary again, TestMCPFanoutLoadClients) open
// PARLEY_MCP_LOAD_CLIENTS (1000) subscribed 2025-11-25 clients — each with
// its own connections, its GET stream read and its pings answered, as
// separate agents have — then posts people's messages one at a time and
// reports what the clients cost the server (goroutines, Go heap and stacks
// after a GC, RSS, each per client) and how long after the post each
// client heard of the message (p50, p99, and the last client's: median and
// worst over the messages).
//
//	PARLEY_MCP_LOAD=1 go test -count=1 -v -run 'TestMCPFanoutLoad$' ./mcp
//
// PARLEY_MCP_LOAD_PROFILE=DIR writes the heap and goroutine profiles of the
// loaded server there, and its CPU profile while the messages go out;
// PARLEY_MCP_LOAD_EACH=1 lists the last client's latency of each message.
//
// The latency is measured from just before the post's durable append (the
// append's own median is reported too) to the client reading the
// notification off its socket; both processes read the same wall clock.
func TestMCPFanoutLoad(t *testing.T) {
	if os.Getenv("PARLEY_MCP_LOAD") == "" {
		t.Skip("a load command: set PARLEY_MCP_LOAD=1")
	}
	clients := 1000
	if n, err := strconv.Atoi(os.Getenv("PARLEY_MCP_LOAD_CLIENTS")); err == nil && n > 0 {
		clients = n
	}
	const messages = 40

	var h atomic.Pointer[http.Handler]
	st := newStack(t, t.TempDir(), stackOptions{sync: true, handler: &h, maxSessions: clients + 16})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// As cmd/parley serves it.
	hs := &http.Server{Handler: *h.Load(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 90 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	url := "http://" + l.Addr().String() + "/mcp"
	session := st.createSession("fan-out")

	// What reads the client process's reports is made before the
	// baseline: it is the test's, not the server's.
	scanBuf := make([]byte, 1<<20)
	base := measure()

	child := exec.Command(os.Args[0], "-test.run=^TestMCPFanoutLoadClients$", "-test.v")
	child.Env = append(os.Environ(), "PARLEY_MCP_LOAD_CHILD="+url, fmt.Sprintf("PARLEY_MCP_LOAD_CLIENTS=%d", clients))
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = child.Wait() }()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(scanBuf, 64<<20)
		for sc.Scan() {
			if s, ok := strings.CutPrefix(sc.Text(), "LOAD "); ok {
				lines <- s
			}
		}
	}()
	next := func(what string) string {
		select {
		case s, ok := <-lines:
			if !ok {
				t.Fatalf("the client process ended before %s", what)
			}
			return s
		case <-time.After(5 * time.Minute):
			t.Fatalf("no %s from the client process", what)
			return ""
		}
	}
	if s := next("ready"); s != "ready" {
		t.Fatalf("client process: %s", s)
	}
	if got := st.srv.Subscribers(); got != clients {
		t.Fatalf("%d subscribers, want %d", got, clients)
	}
	// Let the connections settle (the streams' first heartbeat).
	time.Sleep(heartbeat + time.Second)
	loaded := measure()
	profiles := os.Getenv("PARLEY_MCP_LOAD_PROFILE")
	if profiles != "" {
		for _, name := range []string{"heap", "goroutine"} {
			f, err := os.Create(filepath.Join(profiles, name+".pprof"))
			if err != nil {
				t.Fatal(err)
			}
			if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
	}

	var all, last, appends []time.Duration
	start := time.Now()
	if profiles != "" {
		f, err := os.Create(filepath.Join(profiles, "cpu.pprof"))
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	cpu0 := cpuTime()
	for i := range messages {
		time.Sleep(100 * time.Millisecond) // a lone message, past any coalescing
		t0 := time.Now()
		st.human(session, fmt.Sprintf("fanout %d %d", i, t0.UnixNano()))
		appends = append(appends, time.Since(t0))
		var got struct {
			Seq int     `json:"seq"`
			Lat []int64 `json:"lat_ns"`
		}
		if err := json.Unmarshal([]byte(next(fmt.Sprintf("message %d", i))), &got); err != nil || got.Seq != i || len(got.Lat) != clients {
			t.Fatalf("message %d: %v %d latencies, seq %d", i, err, len(got.Lat), got.Seq)
		}
		var worst time.Duration
		for _, ns := range got.Lat {
			d := time.Duration(ns)
			all = append(all, d)
			worst = max(worst, d)
		}
		last = append(last, worst)
	}
	cpu := cpuTime() - cpu0
	if os.Getenv("PARLEY_MCP_LOAD_EACH") != "" {
		t.Logf("the last client, message by message: %v", last)
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	per := func(a, b uint64) string {
		return fmt.Sprintf("%.1f KiB", (float64(a)-float64(b))/float64(clients)/1024)
	}
	t.Logf("%d subscribed clients, %d messages", clients, messages)
	t.Logf("goroutines: %d before, %d with the clients: %.2f a client",
		base.goroutines, loaded.goroutines, float64(loaded.goroutines-base.goroutines)/float64(clients))
	t.Logf("Go heap in use after GC: %.1f MiB → %.1f MiB: %s a client; stacks %.1f MiB → %.1f MiB: %s a client",
		mib(base.heap), mib(loaded.heap), per(loaded.heap, base.heap), mib(base.stack), mib(loaded.stack), per(loaded.stack, base.stack))
	t.Logf("heap+stacks: %s a client; RSS %.1f MiB → %.1f MiB: %s a client",
		per(loaded.heap+loaded.stack, base.heap+base.stack), mib(base.rss), mib(loaded.rss), per(loaded.rss, base.rss))
	t.Logf("heard after the post: p50 %s, p99 %s; the last client: median %s, worst %s; the append itself: median %s",
		ms(percentile(all, 0.5)), ms(percentile(all, 0.99)), ms(percentile(last, 0.5)), ms(percentile(last, 1)), ms(percentile(appends, 0.5)))
	t.Logf("server CPU: %s a message, %.1f µs a client (with the heartbeats and their answers of those %d ms)",
		ms(cpu/messages), float64(cpu.Microseconds())/messages/float64(clients), time.Since(start).Milliseconds())
}

type memory struct {
	goroutines       int
	heap, stack, rss uint64
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// measure is this process's goroutines and memory after a GC.
func measure() memory {
	// Collect, and give back to the system what is free, so that RSS is
	// what is held.
	for range 3 {
		debug.FreeOSMemory()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memory{goroutines: runtime.NumGoroutine(), heap: ms.HeapInuse, stack: ms.StackInuse}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				m.rss = kb * 1024
			}
		}
	}
	return m
}

// cpuTime is the CPU time this process used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestMCPFanoutLoadClients is TestMCPFanoutLoad's client process: it
// opens the clients, says "LOAD ready", and for each message seq that
// every client heard of prints "LOAD {seq, lat_ns}", until its stdin ends.
func TestMCPFanoutLoadClients(t *testing.T) {
	url := os.Getenv("PARLEY_MCP_LOAD_CHILD")
	if url == "" {
		t.Skip("TestMCPFanoutLoad's client process")
	}
	n, _ := strconv.Atoi(os.Getenv("PARLEY_MCP_LOAD_CLIENTS"))
	type heard struct {
		seq int
		lat time.Duration
	}
	heardc := make(chan heard, 4*n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c := &loadClient{url: url, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}}
			if err := c.connect(func(seq int, lat time.Duration) { heardc <- heard{seq, lat} }); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	fmt.Println("LOAD ready")
	go func() {
		got := map[int][]int64{}
		for h := range heardc {
			got[h.seq] = append(got[h.seq], int64(h.lat))
			if len(got[h.seq]) == n {
				b, _ := json.Marshal(map[string]any{"seq": h.seq, "lat_ns": got[h.seq]})
				fmt.Printf("LOAD %s\n", b)
				delete(got, h.seq)
			}
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// loadClient is a raw 2025-11-25 client: it costs its process little, so
// that the measurement is of the server.
type loadClient struct {
	url string
	hc  *http.Client
	sid string
}

func (c *loadClient) post(body string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.sid != "" {
		req.Header.Set(headerSessionID, c.sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("%s: %d %s", body, resp.StatusCode, b)
	}
	if c.sid == "" {
		c.sid = resp.Header.Get(headerSessionID)
	}
	return string(b), err
}

func (c *loadClient) connect(heard func(seq int, lat time.Duration)) error {
	if _, err := c.post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"load","version":"1"}}}`); err != nil {
		return err
	}
	if _, err := c.post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return err
	}
	if b, err := c.post(`{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"` + InboxURI + `"}}`); err != nil || strings.Contains(b, `"error"`) {
		return fmt.Errorf("subscribe: %v %s", err, b)
	}
	req, err := http.NewRequest(http.MethodGet, c.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, c.sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fmt.Errorf("GET: %d", resp.StatusCode)
	}
	go func() {
		defer resp.Body.Close()
		r := bufio.NewReaderSize(resp.Body, 16<<10)
		marker := []byte(`"content":"fanout `)
		for {
			line, err := r.ReadSlice('\n')
			if err != nil && err != bufio.ErrBufferFull {
				return
			}
			data, ok := bytes.CutPrefix(line, []byte("data: "))
			if !ok {
				continue
			}
			if i := bytes.Index(data, marker); i >= 0 {
				now := time.Now()
				f := strings.Fields(string(data[i+len(marker) : i+len(marker)+bytes.IndexByte(data[i+len(marker):], '"')]))
				if len(f) == 2 {
					seq, _ := strconv.Atoi(f[0])
					t0, _ := strconv.ParseInt(f[1], 10, 64)
					heard(seq, now.Sub(time.Unix(0, t0)))
				}
				continue
			}
			if bytes.Contains(data, []byte(`"method":"ping"`)) {
				var m struct {
					ID json.RawMessage `json:"id"`
				}
				if json.Unmarshal(data, &m) == nil {
					go func() { _, _ = c.post(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID)) }()
				}
			}
		}
	}()
	return nil
}
