package e2e

import (
	"context"
	"crypto/rand"
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
	"github.com/parley-chat/parley/mcp/claudecode"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// BenchmarkClaudeCodeOverhead measures parley's own share of the wait for
// an answer: the time from a person's message in a Telegram topic to the
// first text of Claude Code's answer shown in that topic, minus the CLI's
// own time to its first token. parley serve runs the real CLI ([agent]
// kind = "claude-code") against a fake Messages API that answers at once;
// the topic is telegramtest's, with Telegram's limits on.
//
// Per message i of 20, on one session whose Claude Code process is warm
// (two first messages, not measured, started it and counted the calls a
// turn makes up to its first text):
//
//   - first text: from just before telegramtest's SendText to when the fake
//     Bot API received the sendMessage that first showed the answer (the
//     message's Date);
//   - the CLI's own time: measured in the same run, right after message i's
//     turn ended, on a second warm Claude Code process of the same binary,
//     environment and flags (the driver's, with --permission-prompt-tool
//     stdio as [agent] permissions = "ask" gives), driven directly with
//     claudecode.Process against its own fake API with the same answer:
//     from the start of Process.Send (the turn written to stdin) to the
//     first TextDelta read from Events(). This is what is subtracted; it
//     includes the driver's encoding of one stdin line and parsing of the
//     stdout lines up to the first delta (microseconds), so those are not
//     counted as parley's;
//   - overhead_i = first text_i − CLI_i, and its p50 and p90 are reported.
//
// The fake API's request arrival times split both figures at the model:
// parley's inbound part (Telegram's long poll, commands, the MCP
// notification, the orchestrator's chat_read_since, the write to stdin) is
// (request arrival − message sent) − (reference request arrival − Send),
// its outbound part (stdout, the driver, session.output, the dispatcher,
// the outbox, sendMessage) is (shown − request arrival) − (first TextDelta
// − reference request arrival). Both are reported at p50. So is
// text-behind-a-call-n: of the messages, how many had their first text
// sent after another call to the group made in the same turn (a topic
// rename, a deletion): with one call a second per group, such a call holds
// the text back by up to a second. That wait is parley's own doing and is
// measured; `go test -v` prints each message's figures and those calls.
//
// What is kept out of the measure is pacing left over from earlier turns:
// all topics of a group share its budgets, so spreading the messages over
// topics would not help; they are spaced instead. Before each message the
// benchmark waits until the group's last call is over two seconds old and
// its sliding minute has room, under the 20 a minute parley declares, for
// the turn's calls up to its first text and one more. A turn makes six
// calls, so the group's minute allows about three turns: each run takes
// six to eight minutes. The 429s are reported (target: none).
//
// It runs twice. model-wait=0s: the fake model answers at once, so all
// but the CLI's own time is parley's; this is the figure.
// model-wait=1.5s: the model's text starts 1.5 s after its request (an
// empty delta at once, then the text), as a real model's does; it shows how
// parley's calls at a turn's start, paced at one a second per group, meet
// a model that takes its time. cold-first-text-ms is the first message's
// first text, the process started for it, nothing subtracted.
//
//	go test -run '^$' -bench BenchmarkClaudeCode -benchtime 1x ./cmd/parley
//
// Target: overhead ≤ 300 ms at p50.
func BenchmarkClaudeCodeOverhead(b *testing.B) {
	for _, wait := range []time.Duration{0, 1500 * time.Millisecond} {
		b.Run(fmt.Sprintf("model-wait=%v", wait), func(b *testing.B) { benchCCOverheads(b, wait) })
	}
}

func benchCCOverheads(b *testing.B, wait time.Duration) {
	benchOverheads(b, func() ccRun { return benchCCOverhead(b, 20, wait) })
}

// benchOverheads does b.N runs and reports the figures of the agent's first
// text over them: all samples, the cold first text of each run, the 429s.
// The samples' cli is the agent's own time to its first token, measured
// beside parley's.
func benchOverheads(b *testing.B, run func() ccRun) {
	var all []ccSample
	var cold []time.Duration
	limited := 0
	for range b.N {
		r := run()
		all = append(all, r.samples...)
		cold = append(cold, r.cold)
		limited += r.limited
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	pick := func(f func(ccSample) time.Duration) func(q float64) float64 {
		var v []time.Duration
		for _, s := range all {
			v = append(v, f(s))
		}
		slices.Sort(v)
		return func(q float64) float64 { return ms(v[int(q*float64(len(v)-1)+0.5)]) }
	}
	overhead := pick(func(s ccSample) time.Duration { return s.shown - s.cli })
	b.ReportMetric(overhead(0.5), "overhead-p50-ms")
	b.ReportMetric(overhead(0.9), "overhead-p90-ms")
	b.ReportMetric(pick(func(s ccSample) time.Duration { return s.shown })(0.5), "first-text-p50-ms")
	b.ReportMetric(pick(func(s ccSample) time.Duration { return s.cli })(0.5), "cli-first-token-p50-ms")
	b.ReportMetric(pick(func(s ccSample) time.Duration { return s.request - s.cliRequest })(0.5), "inbound-p50-ms")
	b.ReportMetric(pick(func(s ccSample) time.Duration { return (s.shown - s.request) - (s.cli - s.cliRequest) })(0.5), "outbound-p50-ms")
	behind := 0
	for _, s := range all {
		if len(s.ahead) > 0 {
			behind++
		}
	}
	b.ReportMetric(float64(behind), "text-behind-a-call-n")
	b.ReportMetric(ms(cold[len(cold)/2]), "cold-first-text-ms")
	b.ReportMetric(float64(limited)/float64(b.N), "429s")
	b.ReportMetric(300, "target-ms")
}

// ccSample is one message's figures, each from the moment the message was
// sent (parley) or the turn was written to stdin (the reference CLI).
type ccSample struct {
	request    time.Duration // parley's CLI's model request arrived
	shown      time.Duration // the answer's first text shown in the topic
	cliRequest time.Duration // the reference CLI's model request arrived
	cli        time.Duration // the reference CLI's first TextDelta

	sent  time.Time
	ahead []telegramtest.Call // the group calls after sent and before the one that showed the text
}

func (s ccSample) String() string {
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	var ahead []string
	for _, c := range s.ahead {
		ahead = append(ahead, fmt.Sprintf("%s at %v", c.Method, ms(c.Time.Sub(s.sent))))
	}
	return fmt.Sprintf("request %v, shown %v (after: %s); reference CLI: request %v, first delta %v; overhead %v",
		ms(s.request), ms(s.shown), strings.Join(ahead, ", "), ms(s.cliRequest), ms(s.cli), ms(s.shown-s.cli))
}

type ccRun struct {
	samples []ccSample
	cold    time.Duration // the unmeasured first message's first text (the process started for it)
	limited int
}

// ccBench is what one run drives: parley with its agent, and the reference
// CLI process beside it.
type ccBench struct {
	b           *testing.B
	wait        time.Duration // the model's time to its first token
	srv         *telegramtest.Server
	forum       int64
	topic       int
	m           *serve.Main
	api, refAPI *claudetest.API
	ref         *claudecode.Process
}

func benchCCOverhead(b *testing.B, messages int, wait time.Duration) ccRun {
	cli := claudetest.CLI(b)
	bn := &ccBench{b: b, wait: wait, api: claudetest.NewAPI(b), refAPI: claudetest.NewAPI(b)}
	bn.srv = telegramtest.NewServer(b, telegramtest.Options{RichMessages: true, Limits: true})
	bn.forum = bn.srv.NewForum("Bench")
	cfg := benchConfig(b, bn.srv, bn.forum)
	cfg.Agent = config.Agent{Kind: config.AgentClaudeCode, Command: cli, Workdir: b.TempDir(),
		Permissions: config.PermissionsAsk, MaxRunning: 4, Env: claudetest.Env(b, bn.api.URL)}
	bn.m = servetest.Serve(b, &serve.Main{Config: cfg, Platforms: platforms.All()})
	servetest.AwaitStarted(b, bn.m)

	ref, err := claudecode.NewRunner(claudecode.Options{Command: cli, Workdir: b.TempDir(),
		ExtraEnv: claudetest.Env(b, bn.refAPI.URL), StateDir: b.TempDir(), AskPermissions: true}).
		Start(b.Context(), "reference", benchUUID(b), false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ref.Stop() })
	bn.ref = ref

	return bn.measure(messages, bn.reference)
}

// measure opens the session's topic and has Ann ask the messages in it,
// each followed by the same turn on the agent's reference (reference
// returns when its model request arrived and its first text came, from
// the start of its turn). The first two turns are not measured.
func (bn *ccBench) measure(messages int, reference func(tag string) (request, delta time.Duration)) ccRun {
	b := bn.b
	bn.srv.SendText(bn.forum, 0, ann, "/new bench")
	bn.srv.Await(b, time.Minute, "the session's topic", func() bool { return len(bn.srv.Topics(bn.forum)) == 1 })
	bn.topic = bn.srv.Topics(bn.forum)[0].ID

	// The first message starts parley's agent process, the second
	// is the first on a warm process: neither is measured with the others;
	// the second counts the group calls a turn makes up to its first text.
	bn.roomFor(2) // the topic was just created
	first := bn.turn("cold")
	reference("cold")
	warm := bn.turn("warm")
	reference("warm")
	upToText := len(warm.ahead) + 1

	run := ccRun{cold: first.shown}
	b.ResetTimer()
	for i := range messages {
		bn.roomFor(upToText + 1)
		tag := fmt.Sprintf("%02d", i)
		s := bn.turn(tag)
		s.cliRequest, s.cli = reference(tag)
		run.samples = append(run.samples, s)
		if testing.Verbose() {
			// One line a message; the benchmark's own log keeps ten lines.
			fmt.Printf("message %s: %s\n", tag, s)
		}
	}
	b.StopTimer()
	run.limited = bn.srv.RateLimited()
	return run
}

// answer is the scripted answer to the message tagged tag: a first piece
// that marks it, the rest streamed after a pause as a model would. With a
// wait, the model's text starts with an empty delta and the marker comes
// that long after it: a model slow to its first token.
func (bn *ccBench) answer(tag string) (marker string, block claudetest.Block) {
	marker = "Reply " + tag + ":"
	if bn.wait > 0 {
		return marker, claudetest.Chunks(bn.wait, "", marker, " here is the rest of it.")
	}
	return marker, claudetest.Chunks(200*time.Millisecond, marker, " here is the rest of it.")
}

// turn has Ann ask the question tagged tag in the topic and waits until the
// whole answer is shown and the session is idle again.
func (bn *ccBench) turn(tag string) ccSample {
	b := bn.b
	marker, block := bn.answer(tag)
	bn.api.Say(block)
	question := "Question " + tag + "?"
	sent := time.Now()
	bn.srv.SendText(bn.forum, bn.topic, ann, question)
	var shown time.Time
	var shownID int
	bn.srv.Await(b, time.Minute, "the answer to "+question, func() bool {
		for _, m := range botMessages(bn.srv.Messages(bn.forum, bn.topic)) {
			if strings.Contains(m.Text, marker) {
				shown, shownID = m.Date, m.ID
				return strings.Contains(m.Text, "here is the rest of it.")
			}
		}
		return false
	})
	if shown.Before(sent) {
		b.Fatalf("the answer to %s was shown in a message sent before it (%v < %v)", question, shown, sent)
	}
	session := bn.sessionID()
	bn.srv.Await(b, time.Minute, "the turn's end", func() bool {
		s, err := bn.m.Daemon().Store.Session(context.Background(), session)
		return err == nil && s.Status == core.StatusIdle
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := bn.m.Daemon().WaitIdle(ctx); err != nil {
		b.Fatal(err)
	}
	var ahead []telegramtest.Call
	for _, c := range groupCalls(bn.srv.Calls(), bn.forum) {
		if c.Time.Before(sent) {
			continue
		}
		if c.MessageID == shownID && strings.HasPrefix(c.Method, "send") {
			break
		}
		ahead = append(ahead, c)
	}
	return ccSample{request: modelRequest(b, bn.api, question).Sub(sent), shown: shown.Sub(sent), sent: sent, ahead: ahead}
}

// reference runs the same turn on the reference process and returns when
// its model request arrived and when its first TextDelta was read, both
// from the start of Send.
func (bn *ccBench) reference(tag string) (request, delta time.Duration) {
	b := bn.b
	_, block := bn.answer(tag)
	bn.refAPI.Say(block)
	question := "Question " + tag + "?"
	start := time.Now()
	if err := bn.ref.Send(b.Context(), question); err != nil {
		b.Fatal(err)
	}
	timeout := time.After(time.Minute)
	for delta == 0 {
		select {
		case e, ok := <-bn.ref.Events():
			if !ok {
				b.Fatalf("the reference CLI exited: %v", bn.ref.Err())
			}
			switch e := e.(type) {
			case claudecode.TextDelta:
				if e.Text != "" {
					delta = time.Since(start)
				}
			case claudecode.Result:
				b.Fatalf("the reference turn ended without text: %+v", e)
			}
		case <-timeout:
			b.Fatal("the reference CLI gave no text within a minute")
		}
	}
	for {
		select {
		case e, ok := <-bn.ref.Events():
			if !ok {
				b.Fatalf("the reference CLI exited: %v", bn.ref.Err())
			}
			if r, ok := e.(claudecode.Result); ok {
				if r.IsError {
					b.Fatalf("the reference turn failed: %+v", r)
				}
				return modelRequest(b, bn.refAPI, question).Sub(start), delta
			}
		case <-timeout:
			b.Fatal("the reference turn did not end within a minute")
		}
	}
}

// modelRequest is when the main-loop request carrying question as its
// newest user text arrived at api.
func modelRequest(tb testing.TB, api *claudetest.API, question string) time.Time {
	tb.Helper()
	for _, r := range api.ModelRequests() {
		texts := r.Texts("user")
		if len(texts) > 0 && strings.Contains(texts[len(texts)-1], question) {
			return r.Time
		}
	}
	tb.Fatalf("no model request carries %q", question)
	return time.Time{}
}

func (bn *ccBench) sessionID() core.SessionID {
	ss, err := bn.m.Daemon().Store.Sessions(context.Background())
	if err != nil || len(ss) != 1 {
		bn.b.Fatalf("sessions %v: %v", ss, err)
	}
	return ss[0].ID
}

// groupCalls are the calls to chat that Telegram counts as messages in it
// (sends, edits, deletions, topic changes; not reads or chat actions).
func groupCalls(calls []telegramtest.Call, chat int64) []telegramtest.Call {
	var out []telegramtest.Call
	for _, c := range calls {
		if c.Chat != chat || c.Code != 0 || c.Method == "sendChatAction" {
			continue
		}
		if strings.HasPrefix(c.Method, "send") || strings.HasPrefix(c.Method, "edit") ||
			strings.HasPrefix(c.Method, "delete") || strings.HasSuffix(c.Method, "ForumTopic") {
			out = append(out, c)
		}
	}
	return out
}

// roomFor waits until the group can take n message calls at once: its
// last one over a second ago, and at most 20−n in its sliding minute. A
// second of margin covers the gap between parley's clock and the fake's.
func (bn *ccBench) roomFor(n int) {
	const margin = time.Second
	calls := groupCalls(bn.srv.Calls(), bn.forum)
	if len(calls) == 0 {
		return
	}
	ready := calls[len(calls)-1].Time.Add(time.Second + margin)
	if k := len(calls) - (20 - n); k > 0 {
		ready = later(ready, calls[k-1].Time.Add(time.Minute+margin))
	}
	// Spacing the benchmark's load, not waiting for a result.
	time.Sleep(time.Until(ready))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// benchUUID is a random (version 4) UUID, a Claude Code conversation id.
func benchUUID(tb testing.TB) string {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		tb.Fatal(err)
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}
