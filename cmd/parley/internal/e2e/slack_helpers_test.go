package e2e

// The Slack driver of the end-to-end harness (harness_test.go) and the
// helpers shared by the Slack end-to-end tests. Every name here starts with
// slack so that it sits beside the other platforms' helpers.

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
)

// slackStack is the harness's Slack driver: parley serve against a fake
// Slack (slacktest) with a channel where sessions live as threads.
type slackStack struct {
	*stack
	srv *slacktest.Server
	// channel is where sessions live (slack.channel).
	channel string
	// ann and bob are allowed (slack.allowed_users); stranger is not.
	ann, bob, stranger slacktest.User
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
	st := &slackStack{stack: newStack(t), srv: srv, channel: srv.NewChannel("agents"),
		ann: srv.NewUser("ann"), bob: srv.NewUser("bob"), stranger: srv.NewUser("mallory")}
	slackSection(&st.cfg, srv, st.channel, st.ann, st.bob)
	return st
}

// newSlackBubbleStack is newSlackStack on a fake clock, for a test inside
// synctest.Test: the fake Slack, the daemon and the agent serve and call
// each other on an in-memory network (bubbleNet), so that the test waits
// out Slack's pacing and the outbox's backoff in no real time.
func newSlackBubbleStack(t *testing.T, opts slacktest.Options) *slackStack {
	t.Helper()
	st := newSlackBubbleStackConfig(t, opts)
	st.start()
	return st
}

// newSlackBubbleStackConfig is newSlackStackConfig on a fake clock
// (newSlackBubbleStack).
func newSlackBubbleStackConfig(t *testing.T, opts slacktest.Options) *slackStack {
	t.Helper()
	n := bubbleNet(t)
	opts.Listener = n.Host().Listen()
	st := newSlackStackConfig(t, opts)
	st.net = n
	return st
}

// slackSection configures the Slack adapter for srv: Socket Mode, the
// channel where sessions live, and the people allowed in.
func slackSection(cfg *config.Config, srv *slacktest.Server, channel string, allowed ...slacktest.User) {
	c := slackConfig(cfg)
	c.BotToken, c.AppToken, c.APIURL = srv.BotToken, srv.AppToken, srv.URL
	c.Channel, c.AllowedUsers = channel, nil
	for _, u := range allowed {
		c.AllowedUsers = append(c.AllowedUsers, u.ID)
	}
}

// slConfig is the configuration of parley serve for srv (slackSection).
func slConfig(tb testing.TB, srv *slacktest.Server, channel string, allowed ...slacktest.User) config.Config {
	cfg := testConfig(tb)
	slackSection(&cfg, srv, channel, allowed...)
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

// await waits (up to a minute) until cond holds, re-checking whenever the
// fake Slack's state changes.
func (st *slackStack) await(what string, cond func() bool) {
	st.t.Helper()
	st.srv.Await(st.t, 60*time.Second, what, cond)
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
	for _, s := range st.sessions() {
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

// slackConfig is c's [slack] section, added with its defaults when c has
// none (config.Default).
func slackConfig(c *config.Config) *slack.Config { return c.SectionFor(slack.Platform).(*slack.Config) }
