package slacktest

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// User is a person in the workspace.
type User struct {
	ID   string // "U…"
	Name string
}

// Message is what a channel shows of one message.
type Message struct {
	TS, ThreadTS string // ThreadTS is "" for a message outside threads, TS for a thread's root
	User         string // author; BotUserID for the bot's messages
	BotID        string // BotID for the bot's messages, "" for people's
	Text         string
	Blocks       json.RawMessage // as posted; nil without blocks
	Edits        int
	// Unchanged counts the chat.update calls that left the message as it
	// was (the same text, blocks and attachments): identical re-sends,
	// which Slack accepts and counts against the limits all the same.
	Unchanged int
	Posted    time.Time
	EditedAt  time.Time
	Deleted   bool
	Reactions map[string][]string // emoji name → user ids
	Files     []File
}

// File is a file shared in a message.
type File struct {
	ID, Name, Mime string
	Data           []byte
}

type user struct {
	id, name string
	bot      bool
}

type channel struct {
	id, name  string
	im        bool   // a direct message channel
	dmUser    string // the person in a DM
	botMember bool
	members   map[string]bool
	archived  bool
	created   time.Time
	msgs      map[string]*message
	order     []*message // in posting order
}

type message struct {
	ts, threadTS string
	user, botID  string
	subtype      string
	text         string
	blocks       json.RawMessage
	attachments  json.RawMessage
	clientMsgID  string
	edits        int
	unchanged    int
	posted       time.Time
	editedAt     time.Time
	editTS       string
	deleted      bool
	reactions    []string            // emoji names in order of first use
	reactedBy    map[string][]string // emoji name → user ids
	files        []*file
	streaming    bool
	streamEnds   time.Time  // when Slack ends the stream on its own
	replies      []*message // a root's replies, oldest first
}

// NewChannel creates a public channel with the bot as a member and
// returns its id ("C…").
func (s *Server) NewChannel(name string) string {
	return s.newChannel(name, true)
}

// NewChannelWithoutBot creates a public channel the bot is not in: posting
// there fails with not_in_channel and its messages reach no envelope. A
// Join with the bot's user id (User{ID: s.BotUserID}) adds it.
func (s *Server) NewChannelWithoutBot(name string) string {
	return s.newChannel(name, false)
}

func (s *Server) newChannel(name string, bot bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := &channel{id: s.nextID('C'), name: name, botMember: bot, members: map[string]bool{}, created: s.now(), msgs: map[string]*message{}}
	if bot {
		c.members[s.BotUserID] = true
	}
	s.channels[c.id] = c
	s.changed()
	return c.id
}

// NewUser adds a person to the workspace.
func (s *Server) NewUser(name string) User {
	s.mu.Lock()
	defer s.mu.Unlock()
	u := &user{id: s.nextID('U'), name: name}
	s.users[u.id] = u
	return User{ID: u.id, Name: name}
}

// OpenDM returns the direct message channel ("D…") between u and the bot,
// creating it the first time.
func (s *Server) OpenDM(u User) string {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustUser(u.ID)
	return s.openDM(u.ID).id
}

// openDM finds or creates the DM with a person. Callers hold s.mu.
func (s *Server) openDM(userID string) *channel {
	if id, ok := s.dms[userID]; ok {
		return s.channels[id]
	}
	c := &channel{id: s.nextID('D'), im: true, dmUser: userID, botMember: true, created: s.now(), msgs: map[string]*message{},
		members: map[string]bool{userID: true, s.BotUserID: true}}
	s.channels[c.id] = c
	s.dms[userID] = c.id
	s.changed()
	return c
}

// Archive archives a channel: posting, updating and reacting there fail
// with is_archived.
func (s *Server) Archive(channelID string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustChannel(channelID).archived = true
	s.changed()
}

// Messages returns a channel's top-level messages (thread roots included,
// replies not), oldest first, leaving deleted ones out.
func (s *Server) Messages(channelID string) []Message {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Message
	for _, m := range s.mustChannel(channelID).order {
		if !m.deleted && !m.isReply() {
			out = append(out, m.public())
		}
	}
	return out
}

// Replies returns a thread: its root first, then its replies, oldest
// first, leaving deleted ones out (a deleted root with replies left is
// not shown, where Slack shows "This message was deleted."). A reply's ts
// names its thread.
func (s *Server) Replies(channelID, threadTS string) []Message {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChannel(channelID)
	root := c.msgs[threadRoot(c, threadTS)]
	if root == nil {
		return nil
	}
	var out []Message
	if !root.deleted {
		out = append(out, root.public())
	}
	for _, m := range root.replies {
		if !m.deleted {
			out = append(out, m.public())
		}
	}
	return out
}

// Message returns the message with ts in a channel, deleted or not.
func (s *Server) Message(channelID, ts string) (Message, bool) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mustChannel(channelID).msgs[ts]
	if m == nil {
		return Message{}, false
	}
	return m.public(), true
}

func (m *message) isReply() bool { return m.threadTS != "" && m.threadTS != m.ts }

// public is what the inspectors show of m.
func (m *message) public() Message {
	p := Message{
		TS: m.ts, User: m.user, BotID: m.botID, Text: m.text, Blocks: slices.Clone(m.blocks),
		Edits: m.edits, Unchanged: m.unchanged, Posted: m.posted, EditedAt: m.editedAt, Deleted: m.deleted,
	}
	if m.threadTS != "" {
		p.ThreadTS = m.threadTS
	}
	if len(m.reactions) > 0 {
		p.Reactions = map[string][]string{}
		for _, name := range m.reactions {
			p.Reactions[name] = slices.Clone(m.reactedBy[name])
		}
	}
	for _, f := range m.files {
		p.Files = append(p.Files, File{ID: f.id, Name: f.name, Mime: f.mime, Data: slices.Clone(f.data)})
	}
	return p
}

// addMessage stores m in c, in its thread if it has one. Callers hold
// s.mu.
func (s *Server) addMessage(c *channel, m *message) {
	c.msgs[m.ts] = m
	c.order = append(c.order, m)
	if m.isReply() {
		root := c.msgs[m.threadTS]
		root.threadTS = root.ts
		root.replies = append(root.replies, m)
	}
	s.changed()
}

// threadRoot resolves a thread_ts argument: the root of the thread it
// names (a reply's ts names its thread), or "" when it names no message,
// in which case Slack posts to the channel instead. Callers hold s.mu.
func threadRoot(c *channel, threadTS string) string {
	m := c.msgs[threadTS]
	if threadTS == "" || m == nil || m.deleted {
		// Slack posts a reply to a root that is gone (never was, or
		// deleted) at the channel's top level, without a thread_ts.
		return ""
	}
	if m.isReply() {
		return m.threadTS
	}
	return m.ts
}

// nextID returns a new id with Slack's prefix for its kind: C channel, D
// DM, U user, F file. Callers hold s.mu.
func (s *Server) nextID(prefix byte) string {
	s.seq[prefix]++
	return fmt.Sprintf("%c%010d", prefix, s.seq[prefix])
}

// newTS returns a new message timestamp, "seconds.micros", strictly
// increasing across the workspace. Callers hold s.mu.
func (s *Server) newTS() string {
	t := s.now().Truncate(time.Microsecond)
	if !t.After(s.lastTS) {
		t = s.lastTS.Add(time.Microsecond)
	}
	s.lastTS = t
	return formatTS(t)
}

func formatTS(t time.Time) string {
	return fmt.Sprintf("%d.%06d", t.Unix(), t.Nanosecond()/1000)
}

// mustChannel finds a channel for a test helper, failing the test when it
// does not exist. Callers hold s.mu.
func (s *Server) mustChannel(id string) *channel {
	s.tb.Helper()
	c := s.channels[id]
	if c == nil {
		s.tb.Fatalf("slacktest: no channel %q", id)
	}
	return c
}

// mustUser finds a person for a test helper. Callers hold s.mu.
func (s *Server) mustUser(id string) *user {
	s.tb.Helper()
	u := s.users[id]
	if u == nil {
		s.tb.Fatalf("slacktest: no user %q (create it with NewUser)", id)
	}
	return u
}
