package main

// Helpers shared by the Matrix end-to-end tests: an mxStack is `parley
// serve` (Main, built from configuration) against a real Dendrite, with the
// people's side played by matrixtest.Person clients and an MCP agent, as
// slackStack and tgStack are for the fakes of Slack and Telegram. Every
// name here starts with mx so that it sits beside the other platforms'
// helpers.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
)

// mxWait bounds every wait for what a person sees. The adapter keeps to
// Synapse's budget (ten events, then one every five seconds), so a turn
// that spends the burst takes tens of seconds to show whole.
const mxWait = 2 * time.Minute

// mxStack is parley serve, wired from configuration, against a Dendrite,
// plus an MCP agent subscribed to the inbox.
type mxStack struct {
	t  *testing.T
	hs *matrixtest.Homeserver
	// proxy, when set, stands between parley and Dendrite (the people
	// talk to Dendrite directly).
	proxy *matrixtest.Proxy
	bot   *matrixtest.User
	// ann is allowed (matrix.allowed_users); eve is not.
	ann, eve *matrixtest.Person
	cfg      config.Config
	m        *Main
	agent    *agent
	stop     func()
	// log receives the daemon's log at Info and above, JSON lines.
	log *syncBuffer
}

// mxOptions choose the stack's homeserver side.
type mxOptions struct {
	// proxy puts a matrixtest.Proxy between parley and Dendrite.
	proxy bool
}

// newMXStack starts Dendrite, registers the bot, Ann and Eve, and starts
// parley serve.
func newMXStack(t *testing.T, opts mxOptions) *mxStack {
	t.Helper()
	st := newMXStackConfig(t, opts)
	st.start()
	return st
}

// newMXStackConfig prepares the homeserver, its accounts and the
// configuration without starting parley: the caller may change cfg first.
func newMXStackConfig(t *testing.T, opts mxOptions) *mxStack {
	t.Helper()
	hs := matrixtest.Dendrite(t)
	st := &mxStack{t: t, hs: hs, bot: hs.Register(t, "parley"), log: &syncBuffer{}}
	st.ann = matrixtest.NewPerson(t, hs.URL, hs.Register(t, "ann"))
	st.eve = matrixtest.NewPerson(t, hs.URL, hs.Register(t, "eve"))
	url := hs.URL
	if opts.proxy {
		st.proxy = matrixtest.NewProxy(t, hs.URL)
		url = st.proxy.URL
	}
	st.cfg = config.Default()
	st.cfg.DataDir, st.cfg.HTTP.Listen = t.TempDir(), "127.0.0.1:0"
	matrixConfig(&st.cfg).Homeserver, matrixConfig(&st.cfg).UserID, matrixConfig(&st.cfg).AccessToken = url, string(st.bot.ID), st.bot.AccessToken
	matrixConfig(&st.cfg).AllowedUsers = []string{string(st.ann.User.ID)}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", tail(st.log.String(), 80))
		}
	})
	return st
}

// mxEnv is the stack's configuration as the environment of a `parley
// serve` child process.
func (st *mxStack) mxEnv() []string {
	c := *matrixConfig(&st.cfg)
	return []string{
		"PARLEY_MATRIX_HOMESERVER=" + c.Homeserver, "PARLEY_MATRIX_USER_ID=" + c.UserID,
		"PARLEY_MATRIX_ACCESS_TOKEN=" + c.AccessToken,
		"PARLEY_MATRIX_ALLOWED_USERS=" + strings.Join(c.AllowedUsers, ","),
		fmt.Sprintf("PARLEY_MATRIX_MESSAGES_PER_MINUTE=%d", c.MessagesPerMinute),
		fmt.Sprintf("PARLEY_MATRIX_MESSAGE_BURST=%d", c.MessageBurst),
		"PARLEY_LOG_FORMAT=json",
	}
}

// start opens and runs parley in this process and connects the agent.
func (st *mxStack) start() {
	st.t.Helper()
	st.m = &Main{Config: st.cfg, Logger: slog.New(slog.NewJSONHandler(st.log, &slog.HandlerOptions{Level: slog.LevelInfo}))}
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
	st.agent = mxAgent(st.t, st.m.Addr())
}

// mxAgent connects an MCP agent to parley at addr, subscribed to the inbox.
func mxAgent(t *testing.T, addr string) *agent {
	t.Helper()
	a := connectAgent(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.Subscribe(ctx, mcpgo.SubscribeRequest{Params: mcpgo.SubscribeParams{URI: "ui://chat/inbox"}}); err != nil {
		t.Fatal(err)
	}
	return a
}

// idle waits until the daemon has nothing left to do.
func (st *mxStack) idle() {
	st.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := st.m.daemon.WaitIdle(ctx); err != nil {
		st.t.Fatalf("waiting for the daemon to be idle: %v", err)
	}
}

// room has Ann create a room named name with the bot invited, and waits
// until the bot joined it and its session exists. It returns the room and
// the session.
func (st *mxStack) room(name string) (id.RoomID, core.SessionID) {
	st.t.Helper()
	room := st.ann.CreateRoom(st.t, name, st.bot.ID)
	st.ann.WaitMembership(st.t, room, st.bot.ID, event.MembershipJoin, mxWait)
	var s core.Session
	pollUntil(st.t, mxWait, "the session of room "+name, func() bool {
		var ok bool
		s, ok = st.sessionAt(room)
		return ok
	}, nil)
	return room, s.ID
}

// sessionAt is the session bound on Matrix to room.
func (st *mxStack) sessionAt(room id.RoomID) (core.Session, bool) {
	st.t.Helper()
	for _, s := range st.sessions() {
		if b, ok := s.Bindings["matrix"]; ok && b.Place.Chat == string(room) {
			return s, true
		}
	}
	return core.Session{}, false
}

// sessions are every session in the store.
func (st *mxStack) sessions() []core.Session {
	st.t.Helper()
	all, err := st.m.daemon.Store.Sessions(st.t.Context())
	if err != nil {
		st.t.Fatal(err)
	}
	return all
}

// inbox is every message in the store's inbox, all sessions, oldest first.
func (st *mxStack) inbox() []core.Message {
	st.t.Helper()
	msgs, err := st.m.daemon.Store.Inbox(context.Background(), "", "", 0)
	if err != nil {
		st.t.Fatal(err)
	}
	return msgs
}

// heard waits for the agent's notification and reads the messages after
// the watermark after.
func (st *mxStack) heard(after string) readResult {
	st.t.Helper()
	select {
	case <-st.agent.notes:
	case <-time.After(mxWait):
		st.t.Fatal("the agent was not notified")
	}
	var r readResult
	st.agent.call(st.t, "chat_read_since", map[string]any{"after_id": after}, &r)
	return r
}

// output streams text as the session's live output.
func (st *mxStack) output(session core.SessionID, text string) {
	st.t.Helper()
	st.agent.call(st.t, "session.output", map[string]any{"session_id": string(session), "content": text}, nil)
}

// ask has the agent call ui.ask in the background; the answer arrives on
// the returned channel.
func (st *mxStack) ask(session core.SessionID, question string, options ...string) <-chan string {
	answer := make(chan string, 1)
	go func() {
		var out struct {
			Answer string `json:"answer"`
		}
		if err := st.agent.mxCall("ui.ask", map[string]any{"session_id": string(session), "question": question, "options": options}, &out); err != nil {
			st.t.Error(err)
			close(answer)
			return
		}
		answer <- out.Answer
	}()
	return answer
}

// mxCall is agent.call for goroutines other than the test's, with a longer
// deadline (ui.ask waits for a person): it returns the tool's failure
// instead of ending the test.
func (a *agent) mxCall(tool string, args map[string]any, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := a.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	var text string
	for _, c := range res.Content {
		if tc, ok := c.(mcpgo.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError {
		return fmt.Errorf("%s: %s", tool, text)
	}
	if out != nil {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			return fmt.Errorf("%s: %v in %s", tool, err, text)
		}
	}
	return nil
}

// mxMessages are the messages sender posted in room as p saw them, oldest
// first: m.room.message events that are not edits. Their text as shown now
// is p.Edited(room, ev.ID).
func mxMessages(p *matrixtest.Person, room id.RoomID, sender id.UserID) []*event.Event {
	var out []*event.Event
	for _, ev := range p.Events(room) {
		if ev.Sender == sender && ev.Type == event.EventMessage && matrixtest.ReplaceOf(ev) == "" {
			out = append(out, ev)
		}
	}
	return out
}

// mxEdits are the edits (m.replace) of original in room as p saw them.
func mxEdits(p *matrixtest.Person, room id.RoomID, original id.EventID) []*event.Event {
	var out []*event.Event
	for _, ev := range p.Events(room) {
		if ev.Type == event.EventMessage && matrixtest.ReplaceOf(ev) == original {
			out = append(out, ev)
		}
	}
	return out
}

// mxRedacted reports whether p saw a redaction of ev in room.
func mxRedacted(p *matrixtest.Person, room id.RoomID, ev id.EventID) bool {
	for _, e := range p.Events(room) {
		if e.Type != event.EventRedaction {
			continue
		}
		if e.Redacts == ev {
			return true
		}
		if c, ok := e.Content.Parsed.(*event.RedactionEventContent); ok && c.Redacts == ev {
			return true
		}
	}
	return false
}

// mxMsgType is the msgtype of a message event (m.text, m.notice, …).
func mxMsgType(ev *event.Event) event.MessageType {
	if c, ok := ev.Content.Parsed.(*event.MessageEventContent); ok {
		return c.MsgType
	}
	return ""
}

// mxShowing waits until a message of the bot in room shows text (as
// edited so far), and returns it.
func (st *mxStack) mxShowing(p *matrixtest.Person, room id.RoomID, text string) *event.Event {
	st.t.Helper()
	var found *event.Event
	pollUntil(st.t, mxWait, fmt.Sprintf("a message of the bot showing %q", text), func() bool {
		for _, ev := range mxMessages(p, room, st.bot.ID) {
			if !mxRedacted(p, room, ev.ID) && strings.Contains(p.Edited(room, ev.ID), text) {
				found = ev
				return true
			}
		}
		return false
	}, nil)
	return found
}

// mxPlain is what a Matrix client without HTML shows of markdown md, with
// all white space removed: the form in which a text split into an output
// message and its continuations is compared with the whole.
func mxPlain(md string) string {
	body, _ := markdown.Matrix(md)
	return mxSqueeze(body)
}

// mxSqueeze removes all white space from s.
func mxSqueeze(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

// mxLogged are the daemon's log records at level or above whose message
// or error mentions any of words.
func mxLogged(log string, level slog.Level, words ...string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Level string `json:"level"`
		}
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		var l slog.Level
		if l.UnmarshalText([]byte(rec.Level)) != nil || l < level {
			continue
		}
		for _, w := range words {
			if strings.Contains(strings.ToLower(line), w) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}
