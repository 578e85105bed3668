package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	mxevent "maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// BenchmarkMatrixStreaming streams agents' output into 1, 5 and 20 rooms
// through parley serve and a real Dendrite (matrix-org/dendrite v0.13.8,
// whose limiter is off), behind a matrixtest.Proxy that, with
// limit=synapse, enforces Synapse's default message limit for the bot's
// account: 0.2 events a second with bursts of 10, shared by every room;
// with limit=none it passes everything, as Dendrite, Conduit or a Synapse
// with the bot's limit raised would. parley starts from Synapse's default
// budget either way and learns (see the matrix package's doc). Each
// session streams about 8.6k characters of markdown in 100 steps over
// 15 s, then marks the output final, and right then the person asks
// "!status" in the first room. Before measuring, every session has its
// room (created for it, the allowed person invited and joined) and its
// output message, and the limiter's bucket is given time to refill.
//
// It reports the events the bot sent while measuring, by kind (messages,
// edits, state events, redactions) and in all, the M_LIMIT_EXCEEDED
// answers from the start (the warm-up included), how stale each room is
// while streaming — for each update, the time until the person's client
// shows it or a later one: the median and the maximum — how long after
// the agent's final output every room shows its final text, and how long
// after the person sent "!status" its answer reached their client. Rooms
// are sampled every 20 ms.
//
//	make test-deps   # builds Dendrite once
//	go test -run XXX -bench MatrixStreaming -benchtime 1x ./cmd/parley/
func BenchmarkMatrixStreaming(b *testing.B) {
	for _, limit := range []string{"none", "synapse"} {
		for _, n := range []int{1, 5, 20} {
			b.Run(fmt.Sprintf("limit=%s/rooms=%d", limit, n), func(b *testing.B) { mxBenchRun(b, limit == "synapse", n) })
		}
	}
}

func mxBenchRun(b *testing.B, limit bool, n int) {
	var stale, final, status []time.Duration
	var limited int
	sent := map[matrixtest.Kind]int{}
	for range b.N {
		r := mxBenchStreaming(b, limit, n)
		stale = append(stale, r.stale...)
		final = append(final, r.final)
		status = append(status, r.status)
		for k, v := range r.sent {
			sent[k] += v
		}
		limited += r.limited
	}
	slices.Sort(stale)
	slices.Sort(final)
	slices.Sort(status)
	events := 0
	for _, k := range []matrixtest.Kind{matrixtest.KindMessage, matrixtest.KindEdit, matrixtest.KindState, matrixtest.KindRedaction} {
		b.ReportMetric(float64(sent[k])/float64(b.N), k.String()+"s")
		events += sent[k]
	}
	b.ReportMetric(float64(events)/float64(b.N), "events")
	b.ReportMetric(float64(limited)/float64(b.N), "429s")
	b.ReportMetric(stale[len(stale)/2].Seconds(), "stale-p50-s")
	b.ReportMetric(stale[len(stale)-1].Seconds(), "stale-max-s")
	b.ReportMetric(final[len(final)/2].Seconds(), "final-all-s")
	b.ReportMetric(status[len(status)/2].Seconds(), "status-s")
}

type mxBenchResult struct {
	stale []time.Duration
	final time.Duration
	// status is how long the "!status" answer took to reach the person.
	status time.Duration
	// sent counts the requests the homeserver accepted while measuring,
	// by kind: the events the bot made.
	sent    map[matrixtest.Kind]int
	limited int
}

const (
	mxBenchSteps = 100
	mxBenchPace  = 150 * time.Millisecond
)

func mxBenchStreaming(b *testing.B, limit bool, n int) mxBenchResult {
	b.StopTimer()
	hs := matrixtest.Dendrite(b)
	bot := hs.Register(b, "parley")
	ann := matrixtest.NewPerson(b, hs.URL, hs.Register(b, "ann"))
	proxy := matrixtest.NewProxy(b, hs.URL)
	if limit {
		proxy.SetMessageLimit(0.2, 10)
	}
	cfg := testConfig(b)
	matrixSection(&cfg, proxy.URL, bot, ann)
	m := &serve.Main{Config: cfg, Platforms: platforms.All()}
	ctx := context.Background()
	defer launch(b, m)()
	servetest.AwaitStarted(b, m)

	post := func(id core.SessionID, text string, final bool) { benchOutput(b, m, id, text, final) }
	ids := benchSessions(b, m, n)
	for _, id := range ids {
		post(id, "warming up", false)
	}
	warm, stop := context.WithTimeout(ctx, time.Duration(n)*20*time.Second+2*time.Minute)
	defer stop()
	if err := m.Daemon().WaitIdle(warm); err != nil {
		b.Fatal(err)
	}
	rooms := make([]id.RoomID, n)
	outputs := make([]id.EventID, n)
	for i, sid := range ids {
		s, err := m.Daemon().Store.Session(ctx, sid)
		if err != nil {
			b.Fatal(err)
		}
		ref := s.Bindings["matrix"].Output.Ref
		if ref.IsZero() {
			b.Fatalf("session %d has no output message after the warm-up", i)
		}
		rooms[i], outputs[i] = id.RoomID(ref.Place.Chat), id.EventID(ref.ID)
	}
	for _, room := range rooms {
		ann.Join(b, room)
	}
	for i, room := range rooms {
		ann.WaitFor(b, room, func(e *mxevent.Event) bool { return e.ID == outputs[i] }, time.Minute)
	}
	if limit {
		// The bucket refills at 0.2 a second: 50 s makes it full again.
		time.Sleep(50 * time.Second)
	}

	shown := make([][]time.Time, n)
	for i := range shown {
		shown[i] = make([]time.Time, mxBenchSteps)
	}
	finalShown := make([]time.Time, n)
	finals := make([]string, n)
	finalBodies := make([]string, n)
	for i := range n {
		finals[i] = slStream(i, mxBenchSteps)
		finalBodies[i], _ = markdown.Matrix(finals[i])
	}
	allFinal := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(allFinal)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			all := true
			for i := range rooms {
				text := ann.Edited(rooms[i], outputs[i])
				newest := -1
				for _, mm := range stepMarker.FindAllStringSubmatch(text, -1) {
					k, _ := strconv.Atoi(mm[1])
					newest = max(newest, k)
				}
				now := time.Now()
				for k := 0; k <= newest && k < mxBenchSteps; k++ {
					if shown[i][k].IsZero() {
						shown[i][k] = now
					}
				}
				if finalShown[i].IsZero() && text == finalBodies[i] {
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

	warmLimited := proxy.Counts().Limited
	proxy.ResetCounts()
	b.StartTimer()
	at := make([][]time.Time, n)
	for i := range at {
		at[i] = make([]time.Time, mxBenchSteps)
	}
	start := time.Now()
	for k := range mxBenchSteps {
		for i, sid := range ids {
			at[i][k] = time.Now()
			post(sid, slStream(i, k+1), false)
		}
		time.Sleep(time.Until(start.Add(time.Duration(k+1) * mxBenchPace))) // the agents' pace
	}
	finalAt := time.Now()
	for i, sid := range ids {
		post(sid, finals[i], true)
	}
	statusAt := time.Now()
	ann.Send(b, rooms[0], "!status")
	select {
	case <-allFinal:
	case <-time.After(time.Duration(n)*10*time.Second + 3*time.Minute):
		close(stopSampling)
		<-allFinal
		b.Fatal("not every final text was shown in time")
	}
	answer := ann.WaitFor(b, rooms[0], func(e *mxevent.Event) bool {
		return e.Sender == bot.ID && strings.Contains(matrixtest.Text(e), "turn(s) completed")
	}, 3*time.Minute)
	b.StopTimer()

	c := proxy.Counts()
	r := mxBenchResult{sent: c.Accepted, limited: warmLimited + c.Limited, status: ann.SeenAt(answer.ID).Sub(statusAt)}
	for i := range n {
		for k := range mxBenchSteps {
			r.stale = append(r.stale, shown[i][k].Sub(at[i][k]))
		}
		r.final = max(r.final, finalShown[i].Sub(finalAt))
	}
	return r
}
