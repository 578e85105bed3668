package e2e

// The end-to-end harness: the stack every platform's driver embeds (see
// the package's documentation).
//
// Stops keep the tests fast: a stop inside a test (restart) drains the
// outbox as a person's `parley serve` does, and the last stop, when the
// test ends, holds it (servetest.FinalStop): nothing is asserted then, and
// the drain would only wait out the platforms' pacing.
//
// The clock keeps them fast too. A stack on bubbleNet runs inside
// synctest.Test with its fake platform, daemon and agent on an in-memory
// network (internal/memnet): no real socket, so every wait — Telegram's
// and Slack's pacing, retry_after, the outbox's backoff, outages and
// timeouts — passes on the bubble's fake clock in no real time, exactly,
// whatever the machine's load, and such tests run in parallel. A kill -9
// is crash (crash_test.go). The tests of real servers (Dendrite, Claude
// Code, Chromium, PostgreSQL) and of child processes stay on the real
// clock: a goroutine waiting on real I/O would hold a bubble's clock still.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/memnet"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
)

// stack is the part of every platform's driver that does not depend on the
// platform. Set cfg, logger and noAgent before start.
type stack struct {
	t   *testing.T
	cfg config.Config
	m   *serve.Main
	// stop ends the current run gracefully (the outbox drains); calling it
	// again does nothing.
	stop  func()
	agent *agent
	// logger, when set before start, receives the daemon's log.
	logger *slog.Logger
	// noAgent, when set before start, connects no test agent: parley runs
	// its own ([agent] kind).
	noAgent bool
	// configPath, when set before start, is the file the configuration
	// came from, as parley serve is told (agents never send it).
	configPath string
	// wait bounds heard's wait for the agent's notification.
	wait time.Duration
	// net, when set (a stack inside synctest.Test, see bubbleNet), is the
	// in-memory network the daemon serves on, calls its platforms through
	// and the agent reaches it by. Each run of the daemon is a host of its
	// own (host); the test's clients, the agent among them, are another,
	// with one HTTP client (clients).
	net     *memnet.Network
	host    *memnet.Host
	clients *http.Client
	// crashed is set by crash while it stops the daemon it killed.
	crashed bool
}

// newStack is a stack with the configuration every test starts from.
func newStack(t *testing.T) *stack {
	st := stackOf(t, nil)
	st.cfg = testConfig(t)
	return st
}

// stackOf is a stack for a daemon the test runs itself (a child process
// it kills): nothing to start or stop, and a, when set, as its agent.
func stackOf(t *testing.T, a *agent) *stack {
	return &stack{t: t, agent: a, wait: 30 * time.Second}
}

// testConfig is parley's default configuration with its data in a
// temporary directory and its HTTP server on a free port of 127.0.0.1.
func testConfig(tb testing.TB) config.Config {
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = tb.TempDir(), "127.0.0.1:0"
	return cfg
}

// start opens and runs parley with cfg, waits for its platforms' first
// start and connects the agent. The test's end stops it (finalStop).
func (st *stack) start() {
	st.t.Helper()
	st.m = &serve.Main{Config: st.cfg, ConfigPath: st.configPath, Logger: st.logger, Platforms: platforms.All()}
	if st.net != nil {
		st.host = st.net.Host()
		st.m.Dial = st.host.DialContext
		if st.cfg.HTTP.Listen == "127.0.0.1:0" {
			st.m.Listener = st.host.Listen()
		} else {
			// A restart where the last run listened (a platform calls
			// that address).
			l, err := st.host.ListenOn(st.cfg.HTTP.Listen)
			if err != nil {
				st.t.Fatal(err)
			}
			st.m.Listener = l
		}
	}
	st.stop = st.reportStop(servetest.Launch(st.t, st.m))
	st.t.Cleanup(servetest.FinalStop(st.m, st.stop))
	servetest.AwaitStarted(st.t, st.m)
	if st.noAgent {
		return
	}
	st.agent = subscribedAgentVia(st.t, st.client(), st.m.Addr())
}

// client is the HTTP client that reaches the daemon: over st.net when it
// is set, else net/http's default.
func (st *stack) client() *http.Client {
	if st.net != nil {
		if st.clients == nil {
			st.clients = st.net.Host().Client()
		}
		return st.clients
	}
	return http.DefaultClient
}

// metric sums the samples of a metric of the daemon's /metrics.
func (st *stack) metric(name string) float64 {
	st.t.Helper()
	return metricVia(st.t, st.client(), st.m.Addr(), name)
}

// bubbleNet is the in-memory network of a test inside synctest.Test: a
// stack, its platform's fake and its agent on it serve and call each
// other with no real socket, so that every wait (pacing, retry_after,
// backoff, timeouts) runs on the bubble's fake clock. It is closed, every
// connection with it, when the test ends, after everything started on it
// has stopped, so that no goroutine of the bubble stays blocked on it.
func bubbleNet(t *testing.T) *memnet.Network {
	n := memnet.New()
	t.Cleanup(n.Close)
	return n
}

// restart stops parley gracefully and starts it again on the same data.
func (st *stack) restart() {
	st.t.Helper()
	st.stop()
	st.start()
}

// captureLog sends the daemon's log at level and above, as JSON lines, to
// the returned buffer, and shows its last lines if the test fails. Call it
// before start.
func (st *stack) captureLog(level slog.Level) *servetest.Buffer {
	log := &servetest.Buffer{}
	st.logger = slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: level}))
	st.t.Cleanup(func() {
		if st.t.Failed() {
			st.t.Logf("daemon log (%s and above):\n%s", level, tail(log.String(), 80))
		}
	})
	return log
}

// heard waits for the agent's notification and reads the messages after
// the watermark after.
func (st *stack) heard(after string) readResult {
	st.t.Helper()
	select {
	case <-st.agent.notes:
	case <-time.After(st.wait):
		st.t.Fatal("the agent was not notified")
	}
	return st.read(after)
}

// read has the agent read the messages after the watermark after
// (chat_read_since, the stateless catch-up).
func (st *stack) read(after string) readResult {
	st.t.Helper()
	var r readResult
	st.agent.call(st.t, "chat_read_since", map[string]any{"after_id": after}, &r)
	return r
}

// output has the agent stream text as the session's live output.
func (st *stack) output(session, text string) {
	st.t.Helper()
	st.agent.call(st.t, "session.output", map[string]any{"session_id": session, "content": text}, nil)
}

// ask has the agent call ui.ask in the background; the answer arrives on
// the returned channel, which is closed without one if the call failed.
func (st *stack) ask(session, question string, options ...string) <-chan string {
	answer := make(chan string, 1)
	go func() {
		var out struct {
			Answer string `json:"answer"`
		}
		// ui.ask waits for a person: a long deadline.
		if err := st.agent.callErr(blockingCall, "ui.ask", map[string]any{"session_id": session, "question": question, "options": options}, &out); err != nil {
			st.t.Error(err)
			close(answer)
			return
		}
		answer <- out.Answer
	}()
	return answer
}

// streamTurns plays one agent per session, all at once, each connected on
// its own: agent k streams steps updates of its output, stream(k, i) at
// step i, at an agent's pace of one every 100 ms, then posts answer(k) and
// yields the turn. It returns when every agent is done.
func (st *stack) streamTurns(sessions []string, steps int, stream func(k, i int) string, answer func(k int) string) {
	st.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	for k, id := range sessions {
		a := connectAgentVia(st.t, st.client(), st.m.Addr())
		wg.Go(func() {
			start := time.Now()
			for i := 1; i <= steps; i++ {
				if err := a.callErr(30*time.Second, "session.output", map[string]any{"session_id": id, "content": stream(k, i)}, nil); err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Until(start.Add(time.Duration(i) * 100 * time.Millisecond))) // the agent's pace
			}
			for _, c := range []struct {
				tool string
				args map[string]any
			}{
				{"chat.assistant.post", map[string]any{"session_id": id, "content": answer(k)}},
				{"loop.yield_turn", map[string]any{"session_id": id}},
			} {
				if err := a.callErr(30*time.Second, c.tool, c.args, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		st.t.Fatal(err)
	}
}

// idle waits until the daemon has nothing left to do on any platform.
func (st *stack) idle() {
	st.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := st.m.Daemon().WaitIdle(ctx); err != nil {
		st.t.Fatalf("waiting for the daemon to be idle: %v", err)
	}
}

// inbox is every message in the store's inbox, all sessions, oldest first.
func (st *stack) inbox() []core.Message {
	st.t.Helper()
	msgs, err := st.m.Daemon().Store.Inbox(context.Background(), "", "", 0)
	if err != nil {
		st.t.Fatal(err)
	}
	return msgs
}

// sessions are every session in the store.
func (st *stack) sessions() []core.Session {
	st.t.Helper()
	all, err := st.m.Daemon().Store.Sessions(st.t.Context())
	if err != nil {
		st.t.Fatal(err)
	}
	return all
}

// launch opens m and runs it in the background. The returned stop ends
// the run, reporting its error, and closes m, returning Close's error;
// calling it again does nothing.
func launch(tb testing.TB, m *serve.Main) (stop func() error) {
	tb.Helper()
	stopRun := servetest.Launch(tb, m)
	return func() error {
		runErr, closeErr := stopRun()
		if runErr != nil {
			tb.Errorf("run: %v", runErr)
		}
		return closeErr
	}
}

// reportStop is a stack's stop: it reports Run's and Close's errors to
// the test, except after crash (a killed daemon's run ends as it may).
func (st *stack) reportStop(stop func() (error, error)) func() {
	return func() {
		runErr, closeErr := stop()
		if runErr != nil && !st.crashed {
			st.t.Errorf("run: %v", runErr)
		}
		if closeErr != nil {
			st.t.Errorf("close: %v", closeErr)
		}
	}
}

// reportClose is stop reporting Close's error to tb.
func reportClose(tb testing.TB, stop func() error) func() {
	return func() {
		if err := stop(); err != nil {
			tb.Errorf("close: %v", err)
		}
	}
}

// benchSessions has m's service create n sessions, titled s0, s1, … (as
// POST /api/sessions does).
func benchSessions(tb testing.TB, m *serve.Main, n int) []core.SessionID {
	tb.Helper()
	ids := make([]core.SessionID, n)
	for i := range ids {
		res, err := m.Daemon().Service.Handle(context.Background(), core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: fmt.Sprintf("s%d", i)})
		if err != nil {
			tb.Fatal(err)
		}
		ids[i] = res.Session
	}
	return ids
}

// benchOutput has m's service take text as the session's live output, as
// the agent's session.output does, without MCP in between.
func benchOutput(tb testing.TB, m *serve.Main, id core.SessionID, text string, final bool) {
	if _, err := m.Daemon().Service.Handle(context.Background(), core.Command{Kind: core.OutputUpdate, Origin: core.OriginMCP, Session: id, Text: text, Final: final}); err != nil {
		tb.Fatal(err)
	}
}
