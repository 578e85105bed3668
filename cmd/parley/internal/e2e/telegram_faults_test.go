package e2e

// End-to-end tests of durable outbound delivery (issue 8) against a Bot API
// that fails: a seeded fraction of calls (429 with retry_after, 500, 502, a
// connection reset, a request that never answers), or all of them during a
// 30-second outage. What they prove, through `parley serve`'s wiring and an
// MCP agent: every answer arrives exactly once, no chat is called inside a
// retry_after Telegram announced, and nothing is given up.
//
// The outbox's retry backoff is not configurable (config has no key for
// it), so the deadlines here allow for a backoff cap of 60 s on top of the
// pacing of 20 operations a minute per group.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
)

// faultStack is a tgStack on a fake clock (call it inside synctest.Test)
// whose daemon logs JSON (warnings and errors) to the returned buffer, for
// the outbox's verdicts.
func faultStack(t *testing.T, opts telegramtest.Options) (*tgStack, *servetest.Buffer) {
	t.Helper()
	st := newTGBubbleStackStopped(t, opts)
	log := st.captureLog(slog.LevelWarn)
	st.start()
	return st, log
}

// ask has Ann write text in topic and waits until the agent has read it;
// it returns the session and the agent's new watermark.
func (st *tgStack) ask(topic int, text, after string) (session, last string) {
	st.t.Helper()
	st.srv.SendText(st.forum, topic, ann, text)
	for {
		r := st.heard(after)
		if r.LastID != "" {
			after = r.LastID
		}
		for _, m := range r.Messages {
			if m.Content == text {
				return m.SessionID, after
			}
		}
	}
}

// shown returns the texts of the bot's visible messages in a topic that
// start with prefix.
func shown(srv *telegramtest.Server, chat int64, topic int, prefix string) []string {
	var out []string
	for _, m := range botMessages(srv.Messages(chat, topic)) {
		if strings.HasPrefix(m.Text, prefix) {
			out = append(out, m.Text)
		}
	}
	return out
}

// gaveUp returns the log records in which the outbox gave an operation
// up: the current outbox's "giving up" after its attempts, and the
// error-level "platform operation failed" of a permanent refusal.
func gaveUp(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Level string `json:"level"`
			Msg   string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if strings.Contains(rec.Msg, "giving up") || rec.Level == "ERROR" && strings.Contains(rec.Msg, "platform operation failed") {
			out = append(out, line)
		}
	}
	return out
}

// metric sums the samples of a metric at addr's /metrics.
func metric(tb testing.TB, addr, name string) float64 {
	tb.Helper()
	return metricVia(tb, http.DefaultClient, addr, name)
}

// metricVia is metric through client.
func metricVia(tb testing.TB, client *http.Client, addr, name string) float64 {
	tb.Helper()
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		tb.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		f := strings.Fields(rest[strings.LastIndex(rest, "}")+1:])
		if len(f) > 0 {
			v, _ := strconv.ParseFloat(f[0], 64)
			sum += v
		}
	}
	return sum
}

// faultSummary counts the calls by the fault injected into them.
func faultSummary(srv *telegramtest.Server) map[string]int {
	out := map[string]int{}
	for _, c := range srv.Calls() {
		if c.Fault != 0 {
			out[c.Fault.String()]++
		}
	}
	return out
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// retryGrace excuses calls that reach a chat just after a 429 for it: they
// were on their way (other topics of the group run in parallel) before the
// client could read the 429. On the fake clock such a call arrives at the
// very instant of the 429 (EarlyCalls counts only later arrivals), so
// there is no grace: a call one nanosecond later is early.
const retryGrace = 0

// faultMix is one call in five failing. 429 is listed twice, with a
// retry_after of up to 3 s: it is the fault with a contract to check, and
// its windows are where a call that ignores it shows.
var faultMix = telegramtest.Faults{Every: 5, Seed: 1, MaxRetryAfter: 3, Kinds: []telegramtest.Fault{
	telegramtest.FaultTooMany, telegramtest.FaultTooMany, telegramtest.FaultInternal,
	telegramtest.FaultBadGateway, telegramtest.FaultReset, telegramtest.FaultHang,
}}

// waitOutRetryAfters waits until no retry_after the fake announced so far
// is running, so that what follows is judged on its own.
func waitOutRetryAfters(srv *telegramtest.Server) {
	var until time.Time
	for _, c := range srv.TooManyAnswers() {
		if end := c.Time.Add(time.Duration(c.RetryAfter) * time.Second); end.After(until) {
			until = end
		}
	}
	if d := time.Until(until); d > 0 {
		<-time.After(d)
	}
}

// earlySince returns the early calls (see EarlyCalls) that arrived after
// start.
func earlySince(srv *telegramtest.Server, start time.Time) []telegramtest.EarlyCall {
	var out []telegramtest.EarlyCall
	for _, e := range srv.EarlyCalls(retryGrace) {
		if !e.Call.Time.Before(start) {
			out = append(out, e)
		}
	}
	return out
}

// TestTelegramOutboxUnderFaults: one Bot API call in five fails (faultMix:
// 429 with retry_after, 500, 502, reset, hang) while an agent answers three
// sessions for two turns each, streaming its output, posting a message and
// yielding. Every final output is shown in exactly one output message per
// turn, every assistant message exactly once, no chat is called inside a
// retry_after the fake announced (typing indicators included), and no
// operation is given up.
func TestTelegramOutboxUnderFaults(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st, log := faultStack(t, telegramtest.Options{RichMessages: true, Limits: true})
		// Each turn takes the agent a while (steps × 2 s), as real turns do:
		// the typing indicators run and the outbox is busy, so there are a
		// few dozen faults, several of them 429s while calls are on their way.
		const sessions, turns, steps = 3, 2, 10
		topics, ids := make([]int, sessions), make([]string, sessions)
		last := ""
		for i := range sessions {
			topics[i] = st.newTopic(fmt.Sprintf("faults %d", i+1))
			ids[i], last = st.ask(topics[i], fmt.Sprintf("question 1 for session %d", i+1), last)
		}
		// The sessions exist before the faults start: creating topics is the
		// inbound side's business (it calls Telegram itself, without the
		// outbox), and this test is about the outbox.
		waitOutRetryAfters(st.srv)
		start := time.Now()
		st.srv.InjectFaults(faultMix)

		outputOf := func(i, turn int) string { return fmt.Sprintf("Output of session %d turn %d,", i+1, turn) }
		finalOf := func(i, turn int) string { return outputOf(i, turn) + " final answer" }
		noteOf := func(i, turn int) string { return fmt.Sprintf("Assistant note for session %d turn %d", i+1, turn) }
		for turn := 1; turn <= turns; turn++ {
			if turn > 1 {
				for i := range sessions {
					_, last = st.ask(topics[i], fmt.Sprintf("question %d for session %d", turn, i+1), last)
				}
			}
			for k := 1; k <= steps; k++ {
				for i := range sessions {
					st.output(ids[i], fmt.Sprintf("%s step %d of %d", outputOf(i, turn), k, steps))
					if k == steps/2 {
						st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": ids[i], "content": noteOf(i, turn)}, nil)
					}
				}
				time.Sleep(2 * time.Second) // the agent at work between updates
			}
			for i := range sessions {
				st.agent.call(t, "session.output", map[string]any{"session_id": ids[i], "content": finalOf(i, turn), "final": true}, nil)
				st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": ids[i]}, nil)
			}
		}

		delivered := func() bool {
			for i := range sessions {
				for turn := 1; turn <= turns; turn++ {
					if !slices.Contains(shown(st.srv, st.forum, topics[i], outputOf(i, turn)), finalOf(i, turn)) ||
						len(shown(st.srv, st.forum, topics[i], noteOf(i, turn))) == 0 {
						return false
					}
				}
			}
			return true
		}
		stop := func() string {
			if g := gaveUp(log.String()); len(g) > 0 {
				return fmt.Sprintf("the outbox gave up %d operations, e.g. %s", len(g), g[0])
			}
			return ""
		}
		servetest.PollUntil(t, 6*time.Minute, "every final output and assistant message", delivered, stop)
		// Whatever is still queued lands now: a duplicate would show.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := st.m.Daemon().WaitIdle(ctx); err != nil {
			t.Errorf("daemon not idle: %v", err)
		}
		calls := 0
		for _, c := range st.srv.Calls() {
			if !c.Time.Before(start) {
				calls++
			}
		}
		t.Logf("%d calls since the faults started; faults injected: %v; 429s answered: %d", calls, faultSummary(st.srv), len(st.srv.TooManyAnswers()))

		for i := range sessions {
			for turn := 1; turn <= turns; turn++ {
				if got := shown(st.srv, st.forum, topics[i], outputOf(i, turn)); len(got) != 1 || got[0] != finalOf(i, turn) {
					t.Errorf("session %d turn %d: output messages %q, want exactly one showing %q", i+1, turn, got, finalOf(i, turn))
				}
				if n := len(shown(st.srv, st.forum, topics[i], noteOf(i, turn))); n != 1 {
					t.Errorf("session %d turn %d: assistant message shown %d times, want exactly once", i+1, turn, n)
				}
			}
		}
		if early := earlySince(st.srv, start); len(early) > 0 {
			t.Errorf("%d calls inside a retry_after the Bot API announced, e.g.:\n%s", len(early), describe(early, 8))
		}
		if g := gaveUp(log.String()); len(g) > 0 {
			t.Errorf("the outbox gave up %d operations:\n%s", len(g), strings.Join(g, "\n"))
		}
		if n := st.metric("parley_platform_failures_total"); n != 0 {
			t.Errorf("parley_platform_failures_total = %v, want 0", n)
		}
	})
}

func describe(early []telegramtest.EarlyCall, n int) string {
	var b strings.Builder
	methods := map[string]int{}
	for _, e := range early {
		methods[e.Call.Method]++
	}
	fmt.Fprintf(&b, "  by method: %v\n", methods)
	for i, e := range early {
		if i == n {
			fmt.Fprintf(&b, "  … and %d more\n", len(early)-n)
			break
		}
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// TestTelegramAnswerSurvivesOutage: the Bot API is down for 30 s (every
// call a 502 or a reset) while the agent answers with a message, a final
// output and a yield. Once it is back, the answer arrives, exactly once.
func TestTelegramAnswerSurvivesOutage(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		st, log := faultStack(t, telegramtest.Options{RichMessages: true, Limits: true})
		topic, session, _ := st.session("are you there?")

		const outage = 30 * time.Second
		st.srv.SetOutage(true)
		back := time.After(outage)
		const note, final = "Answer written during the outage", "Output written during the outage, final"
		st.agent.call(t, "chat.assistant.post", map[string]any{"session_id": session, "content": note}, nil)
		st.agent.call(t, "session.output", map[string]any{"session_id": session, "content": final, "final": true}, nil)
		st.agent.call(t, "loop.yield_turn", map[string]any{"session_id": session}, nil)
		<-back
		st.srv.SetOutage(false)
		if len(faultSummary(st.srv)) == 0 {
			t.Fatal("the daemon made no call during the outage: the test proved nothing")
		}

		delivered := func() bool {
			return len(shown(st.srv, st.forum, topic, note)) > 0 && len(shown(st.srv, st.forum, topic, final)) > 0
		}
		stop := func() string {
			if g := gaveUp(log.String()); len(g) > 0 && !delivered() {
				return fmt.Sprintf("the outbox gave up %d operations, e.g. %s", len(g), g[0])
			}
			return ""
		}
		// The last attempt during the outage may have been followed by a
		// backoff of up to the cap (60 s, which jitter only shortens)
		// before the next one; then the two sends wait out the group's
		// pacing of one a second. On the fake clock that bound is exact.
		backAt := time.Now()
		servetest.PollUntil(t, time.Minute+2*time.Second, "the answer after the outage", delivered, stop)
		t.Logf("the answer arrived %v after the outage", time.Since(backAt))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := st.m.Daemon().WaitIdle(ctx); err != nil {
			t.Errorf("daemon not idle: %v", err)
		}
		for _, want := range []string{note, final} {
			if n := len(shown(st.srv, st.forum, topic, want)); n != 1 {
				t.Errorf("%q shown %d times, want exactly once", want, n)
			}
		}
		if g := gaveUp(log.String()); len(g) > 0 {
			t.Errorf("the outbox gave up %d operations:\n%s", len(g), strings.Join(g, "\n"))
		}
	})
}
