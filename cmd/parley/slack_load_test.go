package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

// slStack is parley serve, wired from configuration, in this process,
// against a fake Slack, plus an MCP agent subscribed to every session's
// inbox.
type slStack struct {
	t       *testing.T
	srv     *slacktest.Server
	channel string
	ann     slacktest.User
	cfg     config.Config
	m       *Main
	agent   *agent
	log     *syncBuffer
}

// newSLStack starts a stack whose channel has Ann, the one person allowed
// in; the daemon's warnings and errors go to st.log, shown when the test
// fails.
func newSLStack(t *testing.T, opts slacktest.Options) *slStack {
	t.Helper()
	srv := slacktest.NewServer(t, opts)
	st := &slStack{t: t, srv: srv, channel: srv.NewChannel("sessions"), ann: srv.NewUser("Ann"), log: &syncBuffer{}}
	st.cfg = slConfig(t, srv, st.channel, st.ann)
	st.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log (warnings and errors):\n%s", tail(st.log.String(), 60))
		}
	})
	return st
}

// slConfig is the configuration of parley serve for srv: Socket Mode, the
// channel where sessions live, and the people allowed in.
func slConfig(tb testing.TB, srv *slacktest.Server, channel string, allowed ...slacktest.User) config.Config {
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = tb.TempDir(), "127.0.0.1:0"
	slackConfig(&cfg).BotToken, slackConfig(&cfg).AppToken, slackConfig(&cfg).APIURL = srv.BotToken, srv.AppToken, srv.URL
	slackConfig(&cfg).Channel = channel
	for _, u := range allowed {
		slackConfig(&cfg).AllowedUsers = append(slackConfig(&cfg).AllowedUsers, u.ID)
	}
	return cfg
}

// slEnv is the same configuration as slConfig, as the environment of a
// `parley serve` child process.
func slEnv(srv *slacktest.Server, channel string, allowed ...slacktest.User) []string {
	var ids []string
	for _, u := range allowed {
		ids = append(ids, u.ID)
	}
	return []string{
		"PARLEY_SLACK_BOT_TOKEN=" + srv.BotToken, "PARLEY_SLACK_APP_TOKEN=" + srv.AppToken,
		"PARLEY_SLACK_API_URL=" + srv.URL, "PARLEY_SLACK_CHANNEL=" + channel,
		"PARLEY_SLACK_ALLOWED_USERS=" + strings.Join(ids, ","), "PARLEY_LOG_FORMAT=json",
	}
}

func (st *slStack) start() {
	st.t.Helper()
	st.m, st.agent = slStart(st.t, st.cfg, slog.New(slog.NewJSONHandler(st.log, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// slStart opens and runs a Main with cfg until the test ends, and connects
// an agent subscribed to ui://chat/inbox.
func slStart(t *testing.T, cfg config.Config, logger *slog.Logger) (*Main, *agent) {
	t.Helper()
	m := &Main{Config: cfg, Logger: logger}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	t.Cleanup(func() {
		holdOutbox(m)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		if err := m.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	awaitStarted(t, m)
	a := connectAgent(t, m.Addr())
	sub, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := a.Subscribe(sub, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
		t.Fatal(err)
	}
	return m, a
}

// await waits for the fake's state to satisfy cond.
func (st *slStack) await(timeout time.Duration, what string, cond func() bool) {
	st.t.Helper()
	st.srv.Await(st.t, timeout, what, cond)
}

// idle waits until the daemon has nothing left to do on any platform.
func (st *slStack) idle() {
	st.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := st.m.daemon.WaitIdle(ctx); err != nil {
		st.t.Fatalf("waiting for the daemon to be idle: %v", err)
	}
}

// slRead has the agent read, from after, until it has seen every text in
// want; it returns each one's session and the new watermark. It polls
// chat_read_since, the stateless catch-up, rather than relying on
// notifications.
func slRead(t *testing.T, a *agent, after string, want ...string) (map[string]string, string) {
	t.Helper()
	sessions := map[string]string{}
	pollUntil(t, time.Minute, fmt.Sprintf("the agent to read %q", want), func() bool {
		var r readResult
		a.call(t, "chat_read_since", map[string]any{"after_id": after}, &r)
		if r.LastID != "" {
			after = r.LastID
		}
		for _, m := range r.Messages {
			if m.Author == "user" && slices.Contains(want, m.Content) {
				if _, dup := sessions[m.Content]; dup {
					t.Errorf("the agent read %q twice", m.Content)
				}
				sessions[m.Content] = m.SessionID
			}
		}
		return len(sessions) == len(want)
	}, nil)
	return sessions, after
}

// slCall is agent.call for goroutines other than the test's: it returns
// the tool's failure instead of ending the test.
func (a *agent) slCall(tool string, args map[string]any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := a.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	if res.IsError {
		var text string
		for _, c := range res.Content {
			if tc, ok := c.(mcpgo.TextContent); ok {
				text += tc.Text
			}
		}
		return fmt.Errorf("%s: %s", tool, text)
	}
	return nil
}

// slMarkdown is what a message shows: the text of its markdown blocks
// (where parley puts the agent's markdown), else its text.
func slMarkdown(m slacktest.Message) string {
	var blocks []struct {
		Type string          `json:"type"`
		Text json.RawMessage `json:"text"`
	}
	_ = json.Unmarshal(m.Blocks, &blocks)
	var b strings.Builder
	found := false
	for _, bl := range blocks {
		var s string
		if bl.Type == "markdown" && json.Unmarshal(bl.Text, &s) == nil {
			b.WriteString(s)
			found = true
		}
	}
	if !found {
		return m.Text
	}
	return b.String()
}

// slBotReplies are the bot's messages in a thread, root excluded.
func slBotReplies(srv *slacktest.Server, channel, thread string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range srv.Replies(channel, thread) {
		if m.BotID == srv.BotID && m.TS != thread {
			out = append(out, m)
		}
	}
	return out
}

// slShowing are the bot's replies in a thread whose text contains s.
func slShowing(srv *slacktest.Server, channel, thread, s string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range slBotReplies(srv, channel, thread) {
		if strings.Contains(slMarkdown(m), s) {
			out = append(out, m)
		}
	}
	return out
}

// slIdenticalEdits lists the bot's edits that changed nothing, and counts
// the bot's edits it looked at: Slack sends an app a message_changed event
// for each edit of its messages, with the message before and after, and the
// fake records every envelope. Redeliveries of one event are counted once.
func slIdenticalEdits(srv *slacktest.Server) (identical []string, edits int) {
	type shown struct {
		Text   string          `json:"text"`
		Blocks json.RawMessage `json:"blocks"`
		BotID  string          `json:"bot_id"`
		TS     string          `json:"ts"`
	}
	seen := map[string]bool{}
	for _, env := range srv.Envelopes() {
		var p struct {
			EventID string `json:"event_id"`
			Event   struct {
				Subtype  string `json:"subtype"`
				Message  shown  `json:"message"`
				Previous shown  `json:"previous_message"`
			} `json:"event"`
		}
		if env.Type != "events_api" || json.Unmarshal(env.Payload, &p) != nil || p.Event.Subtype != "message_changed" || seen[p.EventID] {
			continue
		}
		seen[p.EventID] = true
		now, before := p.Event.Message, p.Event.Previous
		if now.BotID == "" {
			continue
		}
		edits++
		if now.Text == before.Text && string(now.Blocks) == string(before.Blocks) {
			identical = append(identical, fmt.Sprintf("message %s edited to what it showed: %.60q", now.TS, now.Text))
		}
	}
	return identical, edits
}

// slResent lists the bot's replies in a thread that repeat an earlier one
// word for word.
func slResent(srv *slacktest.Server, channel, thread string) []string {
	seen := map[string]string{}
	var out []string
	for _, m := range slBotReplies(srv, channel, thread) {
		key := m.Text + "\x00" + string(m.Blocks)
		if first, dup := seen[key]; dup {
			out = append(out, fmt.Sprintf("message %s repeats %s: %.60q", m.TS, first, m.Text))
			continue
		}
		seen[key] = m.TS
	}
	return out
}

// slStream is the agent's markdown for a session after step i: the
// benchmarks' streamStep, under a heading that names the session.
func slStream(session, steps int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Session %d", session)
	for i := range steps {
		b.WriteString(streamStep(i))
	}
	return b.String()
}

// TestSlackFiveSessionsStreamIntoOneChannel: Ann opens five threads in the
// channel and an agent answers all five at once, streaming about 8.6k
// characters of markdown into each over 10 s, then posting an answer and
// yielding, through parley serve with Slack's limits on. The five share the
// channel's one message a second and the workspace's 50 edits a minute.
// Slack never answers 429; every thread ends with one output message,
// edited in place, showing its final text whole, and its answer once; no
// edit repeats what a message shows, no message is posted twice.
func TestSlackFiveSessionsStreamIntoOneChannel(t *testing.T) {
	st := newSLStack(t, slacktest.Options{Limits: true})
	const n, steps = 5, 100
	roots := make([]string, n)
	asks := make([]string, n)
	for k := range n {
		asks[k] = fmt.Sprintf("Task %d: explain the retry loop", k)
		roots[k] = st.srv.Post(st.ann, st.channel, "", asks[k])
	}
	sessions, _ := slRead(t, st.agent, "", asks...)

	answer := func(k int) string { return fmt.Sprintf("Answer %d: the loop reads the **wall clock**.", k) }
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for k := range n {
		a := connectAgent(t, st.m.Addr())
		id := sessions[asks[k]]
		wg.Go(func() {
			start := time.Now()
			for i := 1; i <= steps; i++ {
				if err := a.slCall("session.output", map[string]any{"session_id": id, "content": slStream(k, i)}); err != nil {
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
				if err := a.slCall(c.tool, c.args); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	st.await(3*time.Minute, "every thread's final text and answer", func() bool {
		for k := range n {
			if len(slShowing(st.srv, st.channel, roots[k], "wall clock")) == 0 {
				return false
			}
			out := slShowing(st.srv, st.channel, roots[k], "(step ")
			if len(out) == 0 || slMarkdown(out[len(out)-1]) != slStream(k, steps) {
				return false
			}
		}
		return true
	})
	st.idle()

	if got := st.srv.RateLimited(); got > 0 {
		t.Errorf("Slack answered 429 %d times: the outbox overran its limits", got)
	}
	for k := range n {
		out := slShowing(st.srv, st.channel, roots[k], "(step ")
		if len(out) != 1 {
			t.Errorf("thread %d has %d output messages, want one edited in place", k, len(out))
			continue
		}
		if out[0].Edits == 0 {
			t.Errorf("thread %d: the output message was never edited: it was posted once with the final text, so the stream was not shown", k)
		}
		if got := len(slShowing(st.srv, st.channel, roots[k], answer(k))); got != 1 {
			t.Errorf("thread %d shows its answer %d times, want once", k, got)
		}
		for _, r := range slResent(st.srv, st.channel, roots[k]) {
			t.Errorf("thread %d: %s", k, r)
		}
	}
	identical, edits := slIdenticalEdits(st.srv)
	for _, e := range identical {
		t.Error(e)
	}
	if edits < n {
		t.Errorf("Slack told of %d edits by the bot, want at least one per thread: the check of identical edits saw nothing", edits)
	}
	t.Logf("%d calls, %d edits by the bot", len(st.srv.Calls()), edits)
	if top := st.srv.Messages(st.channel); len(top) != n {
		t.Errorf("the channel has %d top-level messages, want Ann's %d: every bot message stays in its thread", len(top), n)
	}
}
