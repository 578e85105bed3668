package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// BenchmarkTelegramStreaming streams agents' output into one supergroup
// through parley serve and the fake Bot API with Telegram's limits on (1/s
// per chat, all its topics together; 20/min per group; 30/s global). Every session streams 30
// updates over 3 s. It reports the platform calls made, the 429s received
// (target: none) and the staleness of each session's last text: the time
// from the agent's last update to the topic showing it, as the fake
// recorded it, after a warm-up in which every topic and output message was
// created and the group's minute has passed. The group budget serves the
// sessions in turn, so the target is one pacing interval of the shared
// budget: sessions × 3 s.
//
//	go test -run XXX -bench TelegramStreaming -benchtime 1x ./cmd/parley/
func BenchmarkTelegramStreaming(b *testing.B) {
	for _, n := range []int{1, 5, 20} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			for range b.N {
				benchStreaming(b, n)
			}
		})
	}
}

func benchStreaming(b *testing.B, n int) {
	srv := telegramtest.NewServer(b, telegramtest.Options{RichMessages: true, Limits: true})
	forum := srv.NewForum("Bench")
	cfg := benchConfig(b, srv, forum)
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	ctx := context.Background()
	defer launch(b, m)()
	servetest.AwaitStarted(b, m)

	ids := benchSessions(b, m, n)
	// Warm up: every session gets its topic and output message, and the
	// status renames go out; what follows is the steady state.
	for _, id := range ids {
		benchOutput(b, m, id, "warming up", false)
	}
	warm, stop := context.WithTimeout(ctx, time.Duration(n)*20*time.Second+time.Minute)
	defer stop()
	if err := m.Daemon().WaitIdle(warm); err != nil {
		b.Fatal(err)
	}
	// The group's budget is a sliding minute: let the warm-up's calls
	// leave it, so what is measured is the steady state.
	time.Sleep(time.Minute)
	last := map[core.SessionID]string{}
	var lastAt time.Time
	calls0 := len(srv.Calls())
	b.ResetTimer()
	for step := range 30 {
		for _, id := range ids {
			last[id] = fmt.Sprintf("%s step %d %s", id, step, strings.Repeat("·", step))
			benchOutput(b, m, id, last[id], false)
		}
		lastAt = time.Now()
		time.Sleep(100 * time.Millisecond) // the agents' pace
	}
	var stale []time.Duration
	srv.Await(b, time.Duration(n)*15*time.Second+time.Minute, "every session's last text", func() bool {
		stale = stale[:0]
		for _, id := range ids {
			s, err := m.Daemon().Store.Session(ctx, id)
			if err != nil {
				return false
			}
			bnd, ok := s.Bindings["telegram"]
			if !ok {
				return false
			}
			shown := false
			for _, msg := range srv.Messages(forum, threadOf(bnd.Place)) {
				if msg.FromBot && msg.Markdown == last[id] {
					at := msg.Date
					if !msg.EditedAt.IsZero() {
						at = msg.EditedAt
					}
					stale = append(stale, max(at.Sub(lastAt), 0))
					shown = true
				}
			}
			if !shown {
				return false
			}
		}
		return true
	})
	b.StopTimer()
	slices.Sort(stale)
	b.ReportMetric(float64(len(srv.Calls())-calls0), "calls")
	b.ReportMetric(float64(srv.RateLimited()), "429s")
	b.ReportMetric(stale[len(stale)/2].Seconds(), "stale-p50-s")
	b.ReportMetric(stale[len(stale)-1].Seconds(), "stale-max-s")
	b.ReportMetric(float64(n)*3, "target-s")
}

func threadOf(p core.Place) int {
	var n int
	fmt.Sscan(p.Thread, &n)
	return n
}

func benchConfig(tb testing.TB, srv *telegramtest.Server, forum int64) config.Config {
	cfg := testConfig(tb)
	telegramSection(&cfg, srv, forum)
	return cfg
}
