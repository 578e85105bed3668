package main

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
	"github.com/parley-chat/parley/core"
)

// BenchmarkTelegramLoneStream streams about 8.6k characters of markdown in
// 100 steps over 4 s into one topic of a group whose budget nobody else
// uses, then marks the output final, through parley serve and the fake Bot
// API with Telegram's limits on, with and without rich messages. It
// reports how late the newest text is shown (for each step, the time until
// the topic shows that step or a later one; the median and maximum) and how
// long after the final output the whole text is in the topic (in one rich
// message, or the output message plus continuations in HTML mode).
// Targets: newest text ≤ 1 s late at the median; final text whole ≤ 1 s
// after the final output with rich messages, ≤ 3 s without.
//
//	go test -run XXX -bench TelegramLoneStream -benchtime 1x ./cmd/parley/
//
// The topic is sampled every 10 ms, so figures are accurate to that.
func BenchmarkTelegramLoneStream(b *testing.B) {
	for _, rich := range []bool{true, false} {
		b.Run(fmt.Sprintf("rich=%v", rich), func(b *testing.B) {
			var late, final []time.Duration
			for range b.N {
				l, f := benchLoneStream(b, rich)
				late = append(late, l...)
				final = append(final, f)
			}
			slices.Sort(late)
			slices.Sort(final)
			b.ReportMetric(late[len(late)/2].Seconds(), "newest-late-p50-s")
			b.ReportMetric(late[len(late)-1].Seconds(), "newest-late-max-s")
			b.ReportMetric(final[len(final)/2].Seconds(), "final-whole-s")
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

func benchLoneStream(b *testing.B, rich bool) (late []time.Duration, final time.Duration) {
	srv := telegramtest.NewServer(b, telegramtest.Options{RichMessages: rich, Limits: true})
	forum := srv.NewForum("Bench")
	m := &Main{Config: benchConfig(b, srv, forum)}
	ctx := context.Background()
	if err := m.Open(ctx); err != nil {
		b.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() { cancel(); <-done; m.Close() }()

	res, err := m.daemon.Service.Handle(ctx, core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: "lone"})
	if err != nil {
		b.Fatal(err)
	}
	id := res.Session
	post := func(text string, final bool) {
		if _, err := m.daemon.Service.Handle(ctx, core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: text, Final: final}); err != nil {
			b.Fatal(err)
		}
	}
	// Warm up: the topic exists and is renamed before the stream starts,
	// then the group's minute is left untouched.
	post("warming up", false)
	warm, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if err := m.daemon.WaitIdle(warm); err != nil {
		b.Fatal(err)
	}
	s, err := m.daemon.Store.Session(ctx, id)
	if err != nil {
		b.Fatal(err)
	}
	thread := threadOf(s.Bindings["telegram"].Place)
	time.Sleep(time.Minute)

	// shown is, per step, when the topic first showed it or a later one.
	const steps = 100
	shown := make([]time.Time, steps)
	sampleDone := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampleDone)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
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
				if shown[i].IsZero() {
					shown[i] = now
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
		post(text.String(), false)
		if d := time.Until(start.Add(time.Duration(i+1) * 40 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
	finalAt := time.Now()
	post(text.String(), true)
	deadline := time.After(time.Minute)
	for !allShown(srv, forum, thread, steps) {
		select {
		case <-deadline:
			b.Fatal("the whole final text was not shown within a minute")
		case <-time.After(10 * time.Millisecond):
		}
	}
	whole := time.Now()
	close(stopSampling)
	<-sampleDone
	b.StopTimer()
	for i := range steps {
		late = append(late, shown[i].Sub(at[i]))
	}
	return late, whole.Sub(finalAt)
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
