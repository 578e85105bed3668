package daemon_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// BenchmarkUpdateToEvent measures the time from a person's update arriving
// at the fake adapter to its event being published on the bus: adapter →
// Service (authorization, dedup, durable append with fsync) → bus. It
// reports the p50 and p99 latencies.
func BenchmarkUpdateToEvent(b *testing.B) {
	for _, sessions := range []int{1, 16} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			h := newHarness(b, telegramLike())
			sub, cancel := h.d.Bus.Subscribe(1024, false)
			defer cancel()
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				place := core.Place{Chat: "dm", Thread: fmt.Sprint(i % sessions)}
				start := time.Now()
				cmd := h.fk.Receive(core.Command{Kind: core.SendMessage, Place: place, Text: "ping", Actor: core.Actor{ID: "42"}})
			wait:
				for {
					select {
					case e := <-sub.C:
						if e.Kind == core.EventHumanMessage && e.Message.Ref == cmd.Ref {
							lat = append(lat, time.Since(start))
							break wait
						}
					case <-ctx.Done():
						return
					}
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
}
