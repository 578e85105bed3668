package main

// Helpers shared by the Slack end-to-end tests: a slackStack is `parley
// serve` (Main, built from configuration) against slacktest, plus an MCP
// agent, as tgStack is for Telegram. Every name here starts with slack so
// that it sits beside the Telegram helpers.

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
)

// slackStack is parley serve, wired from configuration, against a fake
// Slack, plus an MCP agent subscribed to the inbox.
type slackStack struct {
	t   *testing.T
	srv *slacktest.Server
	// channel is where sessions live (slack.channel).
	channel string
	// ann and bob are allowed (slack.allowed_users); stranger is not.
	ann, bob, stranger slacktest.User
	cfg                config.Config
	m                  *Main
	stop               func()
	agent              *agent
	// logger, when set before start, receives the daemon's log.
	logger *slog.Logger
}

// newSlackStack starts parley serve against a fake Slack with opts (set
// Limits for Slack's rate limits).
func newSlackStack(t *testing.T, opts slacktest.Options) *slackStack {
	t.Helper()
	st := newSlackStackConfig(t, opts)
	st.start()
	return st
}

// newSlackStackConfig prepares the fake Slack, its channel and people, and
// the configuration, without starting parley: the caller may change cfg
// or logger, then call start.
func newSlackStackConfig(t *testing.T, opts slacktest.Options) *slackStack {
	t.Helper()
	srv := slacktest.NewServer(t, opts)
	st := &slackStack{t: t, srv: srv, channel: srv.NewChannel("agents"),
		ann: srv.NewUser("ann"), bob: srv.NewUser("bob"), stranger: srv.NewUser("mallory")}
	st.cfg = config.Default()
	st.cfg.DataDir = t.TempDir()
	st.cfg.HTTP.Listen = "127.0.0.1:0"
	slackConfig(&st.cfg).BotToken, slackConfig(&st.cfg).AppToken, slackConfig(&st.cfg).APIURL = srv.BotToken, srv.AppToken, srv.URL
	slackConfig(&st.cfg).Channel, slackConfig(&st.cfg).AllowedUsers = st.channel, []string{st.ann.ID, st.bob.ID}
	return st
}

// start opens and runs parley and connects the agent.
func (st *slackStack) start() {
	st.t.Helper()
	st.m = &Main{Config: st.cfg, Logger: st.logger}
	if err := st.m.Open(context.Background()); err != nil {
		st.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.m.Run(ctx) }()
	stopped := false
	st.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			st.t.Errorf("run: %v", err)
		}
		if err := st.m.Close(); err != nil {
			st.t.Errorf("close: %v", err)
		}
	}
	st.t.Cleanup(finalStop(st.m, st.stop))
	awaitStarted(st.t, st.m)
	st.agent = connectAgent(st.t, st.m.Addr())
	sub, cancelSub := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelSub()
	if err := st.agent.Subscribe(sub, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
		st.t.Fatal(err)
	}
}

// restart stops parley gracefully and starts it again on the same data.
func (st *slackStack) restart() {
	st.t.Helper()
	st.stop()
	st.start()
}

// await waits (up to a minute) until cond holds, re-checking whenever the
// fake Slack's state changes.
func (st *slackStack) await(what string, cond func() bool) {
	st.t.Helper()
	st.srv.Await(st.t, 60*time.Second, what, cond)
}

// heard waits for the agent's notification and reads the messages after
// the watermark after.
func (st *slackStack) heard(after string) readResult {
	st.t.Helper()
	select {
	case <-st.agent.notes:
	case <-time.After(30 * time.Second):
		st.t.Fatal("the agent was not notified")
	}
	var r readResult
	st.agent.call(st.t, "chat_read_since", map[string]any{"after_id": after}, &r)
	return r
}

// session has Ann write text at the channel's top level, which starts a
// session in its thread, and waits until the agent has read it. It returns
// the thread (the message's ts), the session and the agent's watermark.
func (st *slackStack) session(text string) (thread, session, last string) {
	st.t.Helper()
	thread = st.srv.Post(st.ann, st.channel, "", text)
	r := st.heard("")
	if len(r.Messages) == 0 || r.Messages[len(r.Messages)-1].Content != text {
		st.t.Fatalf("the agent read %+v, want %q", r.Messages, text)
	}
	m := r.Messages[len(r.Messages)-1]
	return thread, m.SessionID, r.LastID
}

// output streams text as the session's live output.
func (st *slackStack) output(session, text string) {
	st.t.Helper()
	st.agent.call(st.t, "session.output", map[string]any{"session_id": session, "content": text}, nil)
}

// inbox is every message in the store's inbox, all sessions, oldest first.
func (st *slackStack) inbox() []core.Message {
	st.t.Helper()
	msgs, err := st.m.daemon.Store.Inbox(context.Background(), "", "", 0)
	if err != nil {
		st.t.Fatal(err)
	}
	return msgs
}

// botReplies are the bot's messages in a thread, the root excluded.
func (st *slackStack) botReplies(thread string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range st.srv.Replies(st.channel, thread) {
		if m.BotID != "" && m.TS != thread {
			out = append(out, m)
		}
	}
	return out
}

// showing waits until a bot reply in thread shows text and returns it.
func (st *slackStack) showing(thread, text string) slacktest.Message {
	st.t.Helper()
	var found slacktest.Message
	st.await("a reply showing "+text, func() bool {
		for _, m := range st.botReplies(thread) {
			if strings.Contains(slackShown(m), text) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// topLevel waits until the bot posts a top-level message in the channel
// showing text, and returns it.
func (st *slackStack) topLevel(text string) slacktest.Message {
	st.t.Helper()
	var found slacktest.Message
	st.await("a top-level message showing "+text, func() bool {
		for _, m := range st.srv.Messages(st.channel) {
			if m.BotID != "" && strings.Contains(slackShown(m), text) {
				found = m
				return true
			}
		}
		return false
	})
	return found
}

// sessionAt is the session bound on Slack at thread.
func (st *slackStack) sessionAt(thread string) (core.Session, bool) {
	st.t.Helper()
	all, err := st.m.daemon.Store.Sessions(st.t.Context())
	if err != nil {
		st.t.Fatal(err)
	}
	for _, s := range all {
		if b, ok := s.Bindings["slack"]; ok && b.Place == (core.Place{Chat: st.channel, Thread: thread}) {
			return s, true
		}
	}
	return core.Session{}, false
}

// acked waits until every envelope of type typ sent so far is
// acknowledged, and returns how many there are.
func (st *slackStack) acked(typ string) int {
	st.t.Helper()
	n := 0
	st.await("the "+typ+" envelopes acknowledged", func() bool {
		n = 0
		for _, e := range st.srv.Envelopes() {
			if e.Type != typ {
				continue
			}
			if e.Acked.IsZero() {
				return false
			}
			n++
		}
		return true
	})
	return n
}

// sessions are every session in the store.
func (st *slackStack) sessions() []core.Session {
	st.t.Helper()
	all, err := st.m.daemon.Store.Sessions(st.t.Context())
	if err != nil {
		st.t.Fatal(err)
	}
	return all
}

// slackShown is what people see of a message: the text of its blocks
// (markdown, section, context, header and rich text), or its text when it
// has no blocks.
func slackShown(m slacktest.Message) string {
	var blocks []slackBlock
	if len(m.Blocks) == 0 || json.Unmarshal(m.Blocks, &blocks) != nil || len(blocks) == 0 {
		return m.Text
	}
	var b strings.Builder
	for _, bl := range blocks {
		for _, s := range bl.texts() {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(s)
		}
	}
	return b.String()
}

// slackButton is a button shown on a message.
type slackButton struct {
	ActionID, Value, Label string
}

// slackButtons are the buttons a message shows, in order.
func slackButtons(m slacktest.Message) []slackButton {
	var blocks []slackBlock
	if json.Unmarshal(m.Blocks, &blocks) != nil {
		return nil
	}
	var out []slackButton
	for _, bl := range blocks {
		els := bl.Elements
		if len(bl.Accessory) > 0 {
			els = append(els, bl.Accessory)
		}
		for _, raw := range els {
			var el struct {
				Type     string `json:"type"`
				ActionID string `json:"action_id"`
				Value    string `json:"value"`
				Text     struct {
					Text string `json:"text"`
				} `json:"text"`
			}
			if json.Unmarshal(raw, &el) == nil && el.Type == "button" {
				out = append(out, slackButton{ActionID: el.ActionID, Value: el.Value, Label: el.Text.Text})
			}
		}
	}
	return out
}

// slackBlock is the part of a Block Kit block whose text people read.
type slackBlock struct {
	Type      string            `json:"type"`
	Text      json.RawMessage   `json:"text"`
	Elements  []json.RawMessage `json:"elements"`
	Accessory json.RawMessage   `json:"accessory"`
}

func (b slackBlock) texts() []string {
	var out []string
	switch b.Type {
	case "markdown":
		var s string
		if json.Unmarshal(b.Text, &s) == nil {
			out = append(out, s)
		}
	case "section", "header":
		var t struct{ Text string }
		if json.Unmarshal(b.Text, &t) == nil {
			out = append(out, t.Text)
		}
	case "context":
		for _, raw := range b.Elements {
			var t struct{ Text string }
			if json.Unmarshal(raw, &t) == nil && t.Text != "" {
				out = append(out, t.Text)
			}
		}
	case "rich_text":
		var walk func(raw json.RawMessage)
		walk = func(raw json.RawMessage) {
			var el struct {
				Text     string            `json:"text"`
				Elements []json.RawMessage `json:"elements"`
			}
			if json.Unmarshal(raw, &el) != nil {
				return
			}
			if el.Text != "" {
				out = append(out, el.Text)
			}
			for _, e := range el.Elements {
				walk(e)
			}
		}
		for _, e := range b.Elements {
			walk(e)
		}
	}
	return out
}

// slackCalls are the fake's calls of method.
func slackCalls(srv *slacktest.Server, method string) []slacktest.Call {
	var out []slacktest.Call
	for _, c := range srv.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}
