package e2e

// The Matrix driver of the end-to-end harness (harness_test.go) and the
// helpers shared by the Matrix end-to-end tests. Every name here starts
// with mx so that it sits beside the other platforms' helpers.

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/adapters/matrix"
	"github.com/parley-chat/parley/adapters/matrix/matrixtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// mxWait bounds every wait for what a person sees. The adapter keeps to
// Synapse's budget (ten events, then one every five seconds), so a turn
// that spends the burst takes tens of seconds to show whole.
const mxWait = 2 * time.Minute

// mxStack is the harness's Matrix driver: parley serve against a real
// Dendrite, with the people's side played by matrixtest.Person clients.
type mxStack struct {
	*stack
	hs *matrixtest.Homeserver
	// proxy, when set, stands between parley and Dendrite (the people
	// talk to Dendrite directly).
	proxy *matrixtest.Proxy
	bot   *matrixtest.User
	// ann is allowed (matrix.allowed_users); eve is not.
	ann, eve *matrixtest.Person
	// log receives the daemon's log at Info and above, JSON lines.
	log *servetest.Buffer
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
	st := &mxStack{stack: newStack(t), hs: hs, bot: hs.Register(t, "parley")}
	st.wait = mxWait
	st.ann = matrixtest.NewPerson(t, hs.URL, hs.Register(t, "ann"))
	st.eve = matrixtest.NewPerson(t, hs.URL, hs.Register(t, "eve"))
	url := hs.URL
	if opts.proxy {
		st.proxy = matrixtest.NewProxy(t, hs.URL)
		url = st.proxy.URL
	}
	matrixSection(&st.cfg, url, st.bot, st.ann)
	st.log = st.captureLog(slog.LevelInfo)
	return st
}

// matrixSection configures the Matrix adapter: the homeserver (or a proxy
// in front of it), the bot's account, and the people allowed in.
func matrixSection(cfg *config.Config, homeserver string, bot *matrixtest.User, allowed ...*matrixtest.Person) {
	c := matrixConfig(cfg)
	c.Homeserver, c.UserID, c.AccessToken = homeserver, string(bot.ID), bot.AccessToken
	c.AllowedUsers = nil
	for _, p := range allowed {
		c.AllowedUsers = append(c.AllowedUsers, string(p.User.ID))
	}
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

// room has Ann create a room named name with the bot invited, and waits
// until the bot joined it and its session exists. It returns the room and
// the session.
func (st *mxStack) room(name string) (id.RoomID, core.SessionID) {
	st.t.Helper()
	room := st.ann.CreateRoom(st.t, name, st.bot.ID)
	st.ann.WaitMembership(st.t, room, st.bot.ID, event.MembershipJoin, mxWait)
	var s core.Session
	servetest.PollUntil(st.t, mxWait, "the session of room "+name, func() bool {
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
	return st.mxShowingAll(p, room, text)
}

// mxApproval is the bot's approval question about cmd in room, as p sees
// it: the message that shows cmd with the approval's options (the
// session's output names the call too, and may come first).
func (st *mxStack) mxApproval(p *matrixtest.Person, room id.RoomID, cmd string) *event.Event {
	st.t.Helper()
	return st.mxShowingAll(p, room, cmd, delivery.ApprovalOptions[len(delivery.ApprovalOptions)-1])
}

// mxShowingAll is the first message of the bot in room that shows every
// one of texts, as p sees it.
func (st *mxStack) mxShowingAll(p *matrixtest.Person, room id.RoomID, texts ...string) *event.Event {
	st.t.Helper()
	var found *event.Event
	servetest.PollUntil(st.t, mxWait, fmt.Sprintf("a message of the bot showing %q", texts), func() bool {
		for _, ev := range mxMessages(p, room, st.bot.ID) {
			if !mxRedacted(p, room, ev.ID) && containsAll(p.Edited(room, ev.ID), texts) {
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

// matrixConfig is c's [matrix] section, added with its defaults when c has
// none (config.Default).
func matrixConfig(c *config.Config) *matrix.Config {
	return c.SectionFor(matrix.Platform).(*matrix.Config)
}

// containsAll says whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
