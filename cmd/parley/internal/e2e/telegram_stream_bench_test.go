package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// BenchmarkTelegramLoneStream streams about 8.6k characters of markdown in
// 100 steps over 4 s into one topic of a group whose budget nobody else
// uses, then marks the output final, through parley serve and the fake Bot
// API with Telegram's limits on (counted per chat, as Telegram does), with
// and without rich messages. It reports the 429s, how late the newest text
// is shown (for each step, the time until the topic shows that step or a
// later one; the median and maximum) and how long after the final output
// the whole text is in the topic (in one rich message, or the output
// message plus continuations in HTML mode). Targets: no 429; newest text
// ≤ 1 s late at the median; final text whole ≤ 1 s after the final output
// with rich messages, ≤ 3 s without.
//
//	go test -run XXX -bench TelegramLoneStream -benchtime 1x ./cmd/parley/
//
// The topics are sampled every 10 ms, so figures are accurate to that.
func BenchmarkTelegramLoneStream(b *testing.B) { benchStreams(b, 1) }

// BenchmarkTelegramGroupStream is BenchmarkTelegramLoneStream with five
// sessions streaming the same way at the same time, each into its own topic
// of one group: they share the chat's one message a second and the group's
// 20 a minute. It reports the same figures over all five sessions, the
// final text's as the median and the slowest session. Targets: no 429, and
// every session's final text shown whole.
//
//	go test -run XXX -bench TelegramGroupStream -benchtime 1x ./cmd/parley/
func BenchmarkTelegramGroupStream(b *testing.B) { benchStreams(b, 5) }

func benchStreams(b *testing.B, sessions int) {
	for _, rich := range []bool{true, false} {
		b.Run(fmt.Sprintf("rich=%v", rich), func(b *testing.B) {
			var late, final []time.Duration
			limited := 0
			for range b.N {
				l, f, n := benchStream(b, rich, sessions)
				late = append(late, l...)
				final = append(final, f...)
				limited += n
			}
			slices.Sort(late)
			slices.Sort(final)
			b.ReportMetric(float64(limited)/float64(b.N), "429s")
			b.ReportMetric(late[len(late)/2].Seconds(), "newest-late-p50-s")
			b.ReportMetric(late[len(late)-1].Seconds(), "newest-late-max-s")
			b.ReportMetric(final[len(final)/2].Seconds(), "final-whole-p50-s")
			b.ReportMetric(final[len(final)-1].Seconds(), "final-whole-max-s")
		})
	}
}

var stepMarker = regexp.MustCompile(`\(step (\d{3})\)`)

// streamStep is step i's addition to the text: ~86 characters of markdown
// with a marker the benchmark finds in what the topic shows.
func streamStep(i int) string {
	switch i % 4 {
	case 0:
		return fmt.Sprintf("\n\n## Part %d\n\nSome **bold** text and `code` here (step %03d).", i, i)
	case 1:
		return fmt.Sprintf("\n\n- an item with a [link](https://example.org/%d) (step %03d)\n- another item", i, i)
	case 2:
		return fmt.Sprintf("\n\n```go\nfmt.Println(%d) // (step %03d)\n```", i, i)
	default:
		return fmt.Sprintf("\n\nA plain paragraph that goes on for a while, as prose does (step %03d).", i)
	}
}

// benchStream streams into n topics at once and returns, over all of them,
// each step's lateness and each topic's time to show its final text whole,
// and the 429s the fake answered.
func benchStream(b *testing.B, rich bool, n int) (late, final []time.Duration, limited int) {
	srv := telegramtest.NewServer(b, telegramtest.Options{RichMessages: rich, Limits: true})
	forum := srv.NewForum("Bench")
	m := &serve.Main{Config: benchConfig(b, srv, forum), Platforms: platforms.All()}
	ctx := context.Background()
	defer launch(b, m)()
	servetest.AwaitStarted(b, m)

	ids := benchSessions(b, m, n)
	post := func(id core.SessionID, text string, final bool) { benchOutput(b, m, id, text, final) }
	// Warm up: the topics exist and are renamed before the stream starts,
	// then the group's minute is left untouched.
	for _, id := range ids {
		post(id, "warming up", false)
	}
	warm, stop := context.WithTimeout(ctx, 2*time.Minute)
	defer stop()
	if err := m.Daemon().WaitIdle(warm); err != nil {
		b.Fatal(err)
	}
	threads := make([]int, n)
	for i, id := range ids {
		s, err := m.Daemon().Store.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		threads[i] = threadOf(s.Bindings["telegram"].Place)
	}
	if err := m.Daemon().Outbox.Drain(warm); err != nil {
		b.Fatal(err)
	}
	time.Sleep(time.Minute)

	// shown is, per topic and step, when the topic first showed it or a
	// later one.
	const steps = 100
	shown := make([][]time.Time, n)
	for i := range shown {
		shown[i] = make([]time.Time, steps)
	}
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			for k, thread := range threads {
				newest := -1
				for _, msg := range srv.Messages(forum, thread) {
					if !msg.FromBot {
						continue
					}
					for _, mm := range stepMarker.FindAllStringSubmatch(msg.Text, -1) {
						n, _ := strconv.Atoi(mm[1])
						newest = max(newest, n)
					}
				}
				now := time.Now()
				for i := 0; i <= newest && i < steps; i++ {
					if shown[k][i].IsZero() {
						shown[k][i] = now
					}
				}
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()
	b.ResetTimer()
	var text strings.Builder
	at := make([]time.Time, steps)
	start := time.Now()
	for i := range steps {
		text.WriteString(streamStep(i))
		at[i] = time.Now()
		for _, id := range ids {
			post(id, text.String(), false)
		}
		if d := time.Until(start.Add(time.Duration(i+1) * 40 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
	finalAt := time.Now()
	for _, id := range ids {
		post(id, text.String(), true)
	}
	whole := make([]time.Time, n)
	deadline := time.After(2 * time.Minute)
	for slices.ContainsFunc(whole, time.Time.IsZero) {
		for k, thread := range threads {
			if whole[k].IsZero() && allShown(srv, forum, thread, steps) {
				whole[k] = time.Now()
			}
		}
		select {
		case <-deadline:
			b.Fatalf("the whole final text was not shown within two minutes in %d of %d topics (429s: %d)",
				len(slices.DeleteFunc(whole, func(t time.Time) bool { return !t.IsZero() })), n, srv.RateLimited())
		case <-time.After(10 * time.Millisecond):
		}
	}
	close(stopSampling)
	<-sampleDone
	b.StopTimer()
	for k := range n {
		for i := range steps {
			late = append(late, shown[k][i].Sub(at[i]))
		}
		final = append(final, whole[k].Sub(finalAt))
	}
	return late, final, srv.RateLimited()
}

// allShown reports whether every step marker is in the topic's messages.
func allShown(srv *telegramtest.Server, forum int64, thread, steps int) bool {
	seen := map[string]bool{}
	for _, msg := range srv.Messages(forum, thread) {
		for _, mm := range stepMarker.FindAllStringSubmatch(msg.Text, -1) {
			seen[mm[1]] = true
		}
	}
	return len(seen) == steps
}
