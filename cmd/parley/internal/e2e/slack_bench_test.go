package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// BenchmarkSlackStreaming streams agents' output into 1, 5 and 20 threads
// of one channel through parley serve and the fake Slack with Slack's
// limits on: chat.postMessage one a second per channel, chat.update 50 a
// minute per workspace, which every thread's output message shares. It
// runs both ways of carrying the live output: mode=update edits it with
// chat.update ([slack] stream = false), mode=stream appends to it with
// Slack's streaming methods ([slack] stream = true: chat.appendStream, 100
// a minute per workspace, started by chat.startStream and stopped by
// chat.stopStream, 20 a minute each). Each
// session streams about 8.6k characters of markdown in 100 steps over
// 15 s, then marks the output final. Before measuring, every session has
// its thread (a root parley posts) and its output message, and a minute
// passes so that Slack's sliding windows are empty.
//
// It reports the platform calls made while measuring (all, and per method:
// post, update, start, append, stop), the 429s received
// from the start (target: none), how stale each thread is while streaming
// — for each update, the time until its thread shows it or a later one:
// the median and the maximum — and how long after the agent's final output
// every thread shows its final text. The threads are sampled every 10 ms,
// so figures are accurate to that.
//
//	go test -run XXX -bench SlackStreaming -benchtime 1x ./cmd/parley/
func BenchmarkSlackStreaming(b *testing.B) {
	for _, stream := range []bool{false, true} {
		mode := "update"
		if stream {
			mode = "stream"
		}
		for _, n := range []int{1, 5, 20} {
			b.Run(fmt.Sprintf("mode=%s/threads=%d", mode, n), func(b *testing.B) {
				var stale, final []time.Duration
				var calls, limited int
				methods := map[string]int{}
				for range b.N {
					r := slBenchStreaming(b, n, stream)
					stale = append(stale, r.stale...)
					final = append(final, r.final)
					calls += r.calls
					limited += r.limited
					for m, k := range r.methods {
						methods[m] += k
					}
				}
				slices.Sort(stale)
				slices.Sort(final)
				b.ReportMetric(float64(calls)/float64(b.N), "calls")
				for _, m := range slBenchMethods {
					b.ReportMetric(float64(methods["chat."+m])/float64(b.N), m)
				}
				b.ReportMetric(float64(limited)/float64(b.N), "429s")
				b.ReportMetric(stale[len(stale)/2].Seconds(), "stale-p50-s")
				b.ReportMetric(stale[len(stale)-1].Seconds(), "stale-max-s")
				b.ReportMetric(final[len(final)/2].Seconds(), "final-all-s")
			})
		}
	}
}

// slBenchMethods are the methods whose calls the benchmark reports, by
// their names after "chat.".
var slBenchMethods = []string{"postMessage", "update", "startStream", "appendStream", "stopStream"}

// slBenchResult is one run of the streaming benchmark.
type slBenchResult struct {
	stale   []time.Duration // per update
	final   time.Duration   // until every thread showed its final text
	calls   int             // platform calls while measuring
	methods map[string]int  // the same, by method
	limited int             // 429s, warm-up included
}

const (
	slBenchSteps = 100
	slBenchPace  = 150 * time.Millisecond
)

func slBenchStreaming(b *testing.B, n int, stream bool) slBenchResult {
	b.StopTimer()
	srv := slacktest.NewServer(b, slacktest.Options{Limits: true, Streaming: stream})
	channel := srv.NewChannel("bench")
	cfg := slConfig(b, srv, channel, srv.NewUser("Ann"))
	slackConfig(&cfg).Stream = stream
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	ctx := context.Background()
	defer launch(b, m)()
	servetest.AwaitStarted(b, m)

	post := func(id core.SessionID, text string, final bool) { benchOutput(b, m, id, text, final) }
	ids := benchSessions(b, m, n)
	// Warm up: every session gets its thread and its output message
	// (showing the heading its output grows from, so that a stream has
	// something to grow), and its status shows; what follows is the
	// steady state.
	for i, id := range ids {
		post(id, slStream(i, 0), false)
	}
	warm, stop := context.WithTimeout(ctx, time.Duration(n)*5*time.Second+time.Minute)
	defer stop()
	if err := m.Daemon().WaitIdle(warm); err != nil {
		b.Fatal(err)
	}
	outputs := make([]core.MessageRef, n)
	for i, id := range ids {
		s, err := m.Daemon().Store.Session(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		outputs[i] = s.Bindings["slack"].Output.Ref
		if outputs[i].IsZero() {
			b.Fatalf("session %d has no output message after the warm-up", i)
		}
	}
	// chat.update's budget is a sliding minute: let the warm-up's calls
	// leave it.
	time.Sleep(time.Minute)

	// shown[i][k] is when thread i first showed step k or a later one;
	// finalShown[i] when it showed the whole final text.
	shown := make([][]time.Time, n)
	for i := range shown {
		shown[i] = make([]time.Time, slBenchSteps)
	}
	finalShown := make([]time.Time, n)
	finals := make([]string, n)
	for i := range n {
		finals[i] = slStream(i, slBenchSteps)
	}
	// The sampler stops once every thread shows its final text (which
	// has every step), or when told to.
	allFinal := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(allFinal)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			all := true
			for i, ref := range outputs {
				msg, _ := srv.Message(channel, ref.ID)
				newest := -1
				// What the message shows: its markdown block, or the
				// markdown a stream appended.
				for _, mm := range stepMarker.FindAllStringSubmatch(slMarkdown(msg), -1) {
					k, _ := strconv.Atoi(string(mm[1]))
					newest = max(newest, k)
				}
				now := time.Now()
				for k := 0; k <= newest && k < slBenchSteps; k++ {
					if shown[i][k].IsZero() {
						shown[i][k] = now
					}
				}
				if newest == slBenchSteps-1 && finalShown[i].IsZero() && slMarkdown(msg) == finals[i] {
					finalShown[i] = now
				}
				all = all && !finalShown[i].IsZero()
			}
			if all {
				return
			}
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
		}
	}()

	calls0 := len(srv.Calls())
	b.StartTimer()
	at := make([][]time.Time, n)
	for i := range at {
		at[i] = make([]time.Time, slBenchSteps)
	}
	start := time.Now()
	for k := range slBenchSteps {
		for i, id := range ids {
			at[i][k] = time.Now()
			post(id, slStream(i, k+1), false)
		}
		time.Sleep(time.Until(start.Add(time.Duration(k+1) * slBenchPace))) // the agents' pace
	}
	finalAt := time.Now()
	for i, id := range ids {
		post(id, finals[i], true)
	}
	select {
	case <-allFinal:
	case <-time.After(3 * time.Minute):
		close(stopSampling)
		<-allFinal
		b.Fatal("not every final text was shown within 3 minutes")
	}
	b.StopTimer()

	r := slBenchResult{calls: len(srv.Calls()) - calls0, methods: map[string]int{}, limited: srv.RateLimited()}
	for _, c := range srv.Calls()[calls0:] {
		r.methods[c.Method]++
	}
	for i := range n {
		for k := range slBenchSteps {
			r.stale = append(r.stale, shown[i][k].Sub(at[i][k]))
		}
		r.final = max(r.final, finalShown[i].Sub(finalAt))
	}
	return r
}
