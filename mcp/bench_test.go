package mcp

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
)

// benchHTTP is shared by the benchmark clients: one keep-alive pool large
// enough for a GET stream and a POST per client.
var benchHTTP = &http.Client{Transport: &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096}}

// benchClient is a 2025-11-25 client over loopback HTTP with its GET
// stream, subscribed to ui://chat/inbox; onUpdate runs for each
// notification with the contents it carries (nil for a bare uri).
func benchClient(b *testing.B, url string, onUpdate func(contents []string)) *client.Client {
	b.Helper()
	tr, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening(), transport.WithHTTPBasicClient(benchHTTP),
		transport.WithHTTPLogger(testLogger()))
	if err != nil {
		b.Fatal(err)
	}
	c := client.NewClient(tr)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method != mcp.MethodNotificationResourceUpdated {
			return
		}
		msgs, _ := n.Params.AdditionalFields["messages"].([]any)
		var cs []string
		for _, m := range msgs {
			if mm, ok := m.(map[string]any); ok {
				s, _ := mm["content"].(string)
				cs = append(cs, s)
			}
		}
		onUpdate(cs)
	})
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "bench"}}}); err != nil {
		b.Fatal(err)
	}
	if err := c.Subscribe(ctx, mcp.SubscribeRequest{Params: mcp.SubscribeParams{URI: InboxURI}}); err != nil {
		b.Fatal(err)
	}
	return c
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func reportLatency(b *testing.B, ds []time.Duration) {
	b.ReportMetric(float64(percentile(ds, 0.50).Microseconds()), "p50-µs")
	b.ReportMetric(float64(percentile(ds, 0.99).Microseconds()), "p99-µs")
}

// fanout is a stack with n subscribed MCP clients, kept across the runs of
// one sub-benchmark.
type fanout struct {
	st      *stack
	session core.SessionID
	current atomic.Pointer[string] // the content being timed
	start   atomic.Int64           // when it was posted (unix ns)
	got     chan time.Duration
}

// BenchmarkNotifyFanout measures the time from a person's message entering
// the Handler (a durable, fsynced append; its median is reported as
// append-p50-µs) to each of 1, 100 and 1000 subscribed MCP sessions (real
// mcp-go clients on loopback HTTP, each with its GET stream) receiving its
// notification. One message at a time, spaced past the coalescing window.
func BenchmarkNotifyFanout(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		var (
			once sync.Once
			f    *fanout
		)
		b.Run(fmt.Sprintf("subscribers=%d", n), func(sb *testing.B) {
			once.Do(func() { f = newFanout(b, n) }) // set up once, torn down with the parent
			var lat, appends []time.Duration
			sb.ResetTimer()
			for i := 0; i < sb.N; i++ {
				// Space the messages past the coalescing window, so each
				// is timed as a lone message, not as part of a burst.
				sb.StopTimer()
				time.Sleep(f.st.srv.opts.Coalesce)
				sb.StartTimer()
				text := fmt.Sprintf("fan-out %d", i)
				f.current.Store(&text)
				t0 := time.Now()
				f.start.Store(t0.UnixNano())
				f.st.human(f.session, text)
				appends = append(appends, time.Since(t0))
				deadline := time.After(30 * time.Second)
				for j := range n {
					select {
					case d := <-f.got:
						lat = append(lat, d)
					case <-deadline:
						sb.Fatalf("message %d: only %d of %d subscribers notified", i, j, n)
					}
				}
			}
			sb.StopTimer()
			reportLatency(sb, lat)
			sb.ReportMetric(float64(percentile(appends, 0.5).Microseconds()), "append-p50-µs")
		})
	}
}

func newFanout(b *testing.B, n int) *fanout {
	f := &fanout{st: newStack(b, b.TempDir(), stackOptions{sync: true}), got: make(chan time.Duration, n)}
	f.session = f.st.createSession("fan-out")
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			benchClient(b, f.st.url, func(cs []string) {
				cur := f.current.Load()
				if cur != nil && slices.Contains(cs, *cur) {
					f.got <- time.Duration(time.Now().UnixNano() - f.start.Load())
				}
			})
		}()
	}
	wg.Wait()
	if got := f.st.srv.Subscribers(); got != n {
		b.Fatalf("%d subscribers, want %d", got, n)
	}
	return f
}

// BenchmarkHumanMessagesE2E measures sustained throughput end to end:
// eight writers post people's messages into eight sessions through
// Handler.Handle (as the HTTP API does; fsynced), and one subscribed MCP
// client counts them as they arrive in notifications (re-reading with
// chat_read_since, from a second connection, if told to). It reports
// messages per second and the per-message latency.
func BenchmarkHumanMessagesE2E(b *testing.B) {
	st := newStack(b, b.TempDir(), stackOptions{sync: true})
	const writers = 8
	sessions := make([]core.SessionID, writers)
	for i := range sessions {
		sessions[i] = st.createSession(fmt.Sprint("e2e ", i))
	}
	var (
		mu      sync.Mutex
		sent    = map[string]time.Time{}
		lat     []time.Duration
		seen    = map[string]bool{}
		all     = make(chan struct{})
		resyncs atomic.Int32
		reader  = mustDial(b, st.url, connOptions{})
		lastID  core.MessageID
		target  int
	)
	record := func(contents []string) {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range contents {
			if seen[c] {
				continue
			}
			seen[c] = true
			if t, ok := sent[c]; ok {
				lat = append(lat, now.Sub(t))
			}
		}
		if target > 0 && len(seen) >= target {
			close(all)
			target = 0
		}
	}
	benchClient(b, st.url, func(cs []string) {
		if cs != nil {
			record(cs)
			return
		}
		// Told to re-read: catch up from the watermark.
		resyncs.Add(1)
		for {
			var read InboxPage
			reader.ok(b, "chat_read_since", map[string]any{"after_id": string(lastID), "limit": 1000}, &read)
			if len(read.Messages) == 0 {
				return
			}
			lastID = read.LastID
			record(contents(read.Messages))
		}
	})
	mu.Lock()
	target = b.N
	mu.Unlock()

	b.ResetTimer()
	begin := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += writers {
				text := fmt.Sprintf("e2e %d", i)
				mu.Lock()
				sent[text] = time.Now()
				mu.Unlock()
				if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: sessions[w], Origin: core.OriginAPI, Text: text}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-all:
	case <-time.After(time.Minute):
		mu.Lock()
		b.Fatalf("%d of %d messages notified", len(seen), b.N)
	}
	elapsed := time.Since(begin)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	mu.Lock()
	reportLatency(b, lat)
	mu.Unlock()
	b.ReportMetric(float64(resyncs.Load()), "resyncs")
}
