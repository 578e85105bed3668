package orchestrator

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// BenchmarkFirstOutput measures parley's side of the time from a person's
// message to the first text people are shown: the message stored and
// published, the notification, the orchestrator's read, the turn handed to
// the agent (a fake whose model answers at once), its first text back
// through session.output, stored and published. Real loopback TCP, bbolt
// without fsync. ns/op is a whole turn; p50-ms and p90-ms are the first
// output's latency.
func BenchmarkFirstOutput(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	st := newStackOn(b, b.TempDir(), l)
	id := st.create()
	fc := newFakeClaude(func(ft *fakeTurn) { ft.Say("an answer") })
	o, err := New(Options{Endpoint: "http://" + l.Addr().String() + "/mcp", Agents: claudeAgent(fc, true), Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	sub, unsub := st.bus.Subscribe(4096, false)
	defer unsub()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- o.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	wait := func(kind core.EventKind) {
		b.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case e := <-sub.C:
				if e.Session == id && e.Kind == kind {
					return
				}
			case <-timeout:
				b.Fatalf("no %s", kind)
			}
		}
	}
	// The first turn starts the agent's process.
	st.say(id, ann, "warm up")
	wait(core.EventTurnComplete)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		st.say(id, ann, "a question")
		wait(core.EventOutput)
		lat = append(lat, time.Since(start))
		wait(core.EventTurnComplete)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds())/1000, "p90-ms")
}
