package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
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

// BenchmarkRecovery measures the time from start-up (daemon.Open on a
// data directory left by a crash) to the first replayed send reaching the
// platform, with 10,000 journaled assistant messages waiting. It also
// reports how long Open took, which includes enqueueing every replayed
// operation.
func BenchmarkRecovery(b *testing.B) {
	const journaled = 10000
	ctx := context.Background()
	template := b.TempDir()
	st, err := bolt.Open(filepath.Join(template, daemon.DBFile), bolt.Options{NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	place := core.Place{Chat: "group", Thread: "t1"}
	sess, _, err := st.CreateSession(ctx, core.Session{Title: "recovery", Status: core.StatusIdle,
		Bindings: map[core.AdapterName]core.Binding{"fake": {Adapter: "fake", Place: place}}})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < journaled; i += 1000 {
		evs := make([]core.Event, 1000)
		for j := range evs {
			evs[j] = core.Event{Kind: core.EventAssistant, Session: sess.ID, Origin: core.OriginMCP,
				Message: &core.Message{Session: sess.ID, Role: core.RoleAssistant, Content: fmt.Sprint("answer ", i+j)}}
		}
		if _, err := st.AppendEvents(ctx, evs...); err != nil {
			b.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := os.ReadFile(filepath.Join(template, daemon.DBFile))
	if err != nil {
		b.Fatal(err)
	}
	var opened, first []time.Duration
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, daemon.DBFile), db, 0o600); err != nil {
			b.Fatal(err)
		}
		fk := fake.New("fake", telegramLike())
		b.StartTimer()
		start := time.Now()
		d, err := daemon.Open(ctx, daemon.Options{DataDir: dir, Adapters: []core.Adapter{fk}})
		if err != nil {
			b.Fatal(err)
		}
		opened = append(opened, time.Since(start))
		for len(fk.Ops()) == 0 {
			time.Sleep(50 * time.Microsecond)
		}
		first = append(first, fk.Ops()[0].Time.Sub(start))
		b.StopTimer()
		d.Outbox.Close()
		d.Close()
	}
	slices.Sort(opened)
	slices.Sort(first)
	b.ReportMetric(float64(first[len(first)/2].Milliseconds()), "first-send-ms")
	b.ReportMetric(float64(opened[len(opened)/2].Milliseconds()), "open-ms")
}
