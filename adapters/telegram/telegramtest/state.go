package telegramtest

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/go-telegram/bot/models"
)

const (
	kindPrivate    = models.ChatTypePrivate
	kindSupergroup = models.ChatTypeSupergroup
)

// defaultTopicColor is the icon colour Telegram gives a topic created
// without one.
const defaultTopicColor = 0x6FB9F0

// User is a person in the fake chats.
type User struct {
	ID        int64
	FirstName string
	LastName  string
	Username  string
}

func (u User) wire() *models.User {
	return &models.User{ID: u.ID, FirstName: u.FirstName, LastName: u.LastName, Username: u.Username, LanguageCode: "en"}
}

// owner creates every group and acts for "a person" on topics.
var owner = User{ID: 1, FirstName: "Owner", Username: "owner"}

// Rights are the bot's rights in a group.
type Rights struct {
	// Admin makes the bot an administrator; without it the bot is a plain
	// member and the other rights do not apply.
	Admin          bool
	ManageTopics   bool // can_manage_topics: create, rename, close topics
	DeleteMessages bool // can_delete_messages: delete other people's messages
}

func (r Rights) manageTopics() bool   { return r.Admin && r.ManageTopics }
func (r Rights) deleteMessages() bool { return r.Admin && r.DeleteMessages }

type chat struct {
	id      int64
	kind    models.ChatType
	title   string
	forum   bool
	user    User // the other side of a private chat
	rights  Rights
	blocked bool
	nextMsg int
	msgs    map[int]*message
	order   []int
	topics  map[int]*topic
	tOrder  []int
	members map[int64]User
}

type topic struct {
	id        int
	name      string
	color     int
	emoji     string
	closed    bool
	deleted   bool
	byBot     bool
	creator   User
	createdAt time.Time
}

type message struct {
	id       int
	chat     *chat
	thread   int
	from     User
	fromBot  bool
	date     time.Time
	content  content
	markup   *models.InlineKeyboardMarkup
	silent   bool
	edits    int
	editDate time.Time
	deleted  bool
	replyTo  int
	document *fileEntry
	voice    *fileEntry
	duration int
	photo    []*fileEntry
	caption  content
}

// content is what a message shows, and how it was sent.
type content struct {
	text      string // visible text
	entities  []models.MessageEntity
	source    string // text as sent
	parseMode string
	rich      *richInput
}

// same reports whether o shows exactly what c shows: Telegram compares the
// resulting text and entities, not how they were written.
func (c content) same(o content) bool {
	if c.text != o.text || (c.rich == nil) != (o.rich == nil) {
		return false
	}
	if len(c.entities)+len(o.entities) > 0 {
		a, _ := json.Marshal(c.entities)
		b, _ := json.Marshal(o.entities)
		if string(a) != string(b) {
			return false
		}
	}
	return c.rich == nil || c.rich.Markdown == o.rich.Markdown && c.rich.HTML == o.rich.HTML && string(c.rich.Blocks) == string(o.rich.Blocks)
}

func (c *chat) add(m *message) *message {
	c.nextMsg++
	m.id = c.nextMsg
	m.chat = c
	c.msgs[m.id] = m
	c.order = append(c.order, m.id)
	return m
}

// Message is a message as the fake chat shows it.
type Message struct {
	ID      int
	Chat    int64
	Thread  int // forum topic (0: General or no topics)
	From    User
	FromBot bool
	Date    time.Time
	// Text is the visible text: after HTML entity parsing, or roughly what
	// a rich message renders.
	Text string
	// HTML is the text as sent in HTML parse mode, or a rich message's html.
	HTML string
	// Markdown is a rich message's markdown, or the text as sent in a
	// Markdown parse mode.
	Markdown  string
	ParseMode string // lower-cased: "html", "markdownv2", … or ""
	Entities  []models.MessageEntity
	Rich      bool
	Silent    bool // sent with disable_notification
	Buttons   [][]models.InlineKeyboardButton
	Edits     int // successful text edits
	EditedAt  time.Time
	Deleted   bool
	ReplyTo   int
	Caption   string
	Document  *FileInfo
	Voice     *FileInfo
	Photo     *FileInfo // the largest size
}

// FileInfo describes a file attached to a message.
type FileInfo struct {
	ID   string
	Name string
	MIME string
	Size int64
}

func (m *message) export() Message {
	out := Message{
		ID: m.id, Chat: m.chat.id, Thread: m.thread, From: m.from, FromBot: m.fromBot, Date: m.date,
		Text: m.content.text, ParseMode: m.content.parseMode, Entities: m.content.entities,
		Rich: m.content.rich != nil, Silent: m.silent, Edits: m.edits, EditedAt: m.editDate,
		Deleted: m.deleted, ReplyTo: m.replyTo, Caption: m.caption.text,
	}
	switch {
	case m.content.rich != nil:
		out.HTML, out.Markdown = m.content.rich.HTML, m.content.rich.Markdown
	case m.content.parseMode == "html":
		out.HTML = m.content.source
	case m.content.parseMode != "":
		out.Markdown = m.content.source
	}
	if m.markup != nil {
		out.Buttons = m.markup.InlineKeyboard
	}
	out.Document = m.document.info()
	out.Voice = m.voice.info()
	if len(m.photo) > 0 {
		out.Photo = m.photo[len(m.photo)-1].info()
	}
	return out
}

// Topic is a forum topic.
type Topic struct {
	ID        int
	Name      string
	IconColor int
	Closed    bool
	Deleted   bool
	ByBot     bool // created by the bot (rather than by a person)
}

// CommandScope identifies a list of commands set with setMyCommands.
type CommandScope struct {
	Type     string // "default", "all_group_chats", "chat", ...
	Chat     int64
	User     int64
	Language string
}

// Messages returns the visible messages of a chat's thread (0: the General
// topic, or the whole chat without topics), oldest first.
func (s *Server) Messages(chatID int64, thread int) []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil {
		return nil
	}
	var out []Message
	for _, id := range c.order {
		if m := c.msgs[id]; m.thread == thread && !m.deleted {
			out = append(out, m.export())
		}
	}
	return out
}

// Message returns one message, deleted or not.
func (s *Server) Message(chatID int64, id int) (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.chats[chatID]; c != nil {
		if m := c.msgs[id]; m != nil {
			return m.export(), true
		}
	}
	return Message{}, false
}

// Topics returns a chat's forum topics, deleted ones included, oldest first.
func (s *Server) Topics(chatID int64) []Topic {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.chats[chatID]
	if c == nil {
		return nil
	}
	var out []Topic
	for _, id := range c.tOrder {
		t := c.topics[id]
		out = append(out, Topic{ID: t.id, Name: t.name, IconColor: t.color, Closed: t.closed, Deleted: t.deleted, ByBot: t.byBot})
	}
	return out
}

// Commands returns the bot's command lists by scope.
func (s *Server) Commands() map[CommandScope][]models.BotCommand {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[CommandScope][]models.BotCommand{}
	for k, v := range s.commands {
		out[k] = append([]models.BotCommand(nil), v...)
	}
	return out
}

// NewForum creates a forum supergroup (topics enabled) where the bot is an
// administrator that can manage topics and delete messages.
func (s *Server) NewForum(title string) int64 {
	return s.newGroup(title, true)
}

// NewGroupWithoutTopics creates a supergroup without topics, the bot an
// administrator in it.
func (s *Server) NewGroupWithoutTopics(title string) int64 {
	return s.newGroup(title, false)
}

func (s *Server) newGroup(title string, forum bool) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextGroup++
	c := s.addChat(&chat{id: -s.nextGroup, kind: kindSupergroup, title: title, forum: forum,
		rights: Rights{Admin: true, ManageTopics: true, DeleteMessages: true}})
	c.members[owner.ID] = owner
	// A new supergroup starts with a service message.
	c.nextMsg = 1
	return c.id
}

// NewPrivateChat creates the private chat between user and the bot; its id
// is the user's.
func (s *Server) NewPrivateChat(user User) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.addChat(&chat{id: user.ID, kind: kindPrivate, user: user})
	c.members[user.ID] = user
	return c.id
}

func (s *Server) addChat(c *chat) *chat {
	c.msgs = map[int]*message{}
	c.topics = map[int]*topic{}
	c.members = map[int64]User{}
	s.chats[c.id] = c
	s.chatOrder = append(s.chatOrder, c.id)
	s.changed()
	return c
}

// SetBotRights sets the bot's status and rights in a group.
func (s *Server) SetBotRights(chatID int64, r Rights) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustChat(chatID).rights = r
	s.changed()
}

// BlockBot makes the person of a private chat block the bot: sends to the
// chat fail with 403 "Forbidden: bot was blocked by the user".
func (s *Server) BlockBot(chatID int64) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mustChat(chatID).blocked = true
	s.changed()
}

// mustChat returns a chat the test created. Callers hold s.mu.
func (s *Server) mustChat(id int64) *chat {
	s.tb.Helper()
	c := s.chats[id]
	if c == nil {
		s.tb.Fatalf("telegramtest: no chat %d", id)
	}
	return c
}

// wireChat is the chat object of messages and answers. In callback queries
// Telegram may leave out is_forum; the fake always does, so adapters must
// not rely on it there.
func wireChat(c *chat, inCallback bool) models.Chat {
	out := models.Chat{ID: c.id, Type: c.kind, Title: c.title, IsForum: c.forum && !inCallback}
	if c.kind == kindPrivate {
		out.FirstName, out.LastName, out.Username = c.user.FirstName, c.user.LastName, c.user.Username
	}
	return out
}

// wire is the Message object of answers and updates.
func (s *Server) wire(m *message, inCallback bool) *models.Message {
	c := m.chat
	out := &models.Message{
		ID:   m.id,
		Date: int(m.date.Unix()),
		Chat: wireChat(c, inCallback),
	}
	if m.fromBot {
		b := s.bot
		out.From = &b
	} else {
		out.From = m.from.wire()
	}
	if m.thread != 0 {
		out.MessageThreadID = m.thread
		out.IsTopicMessage = c.forum
	}
	if !m.editDate.IsZero() {
		out.EditDate = int(m.editDate.Unix())
	}
	switch {
	case m.replyTo != 0 && c.msgs[m.replyTo] != nil && !c.msgs[m.replyTo].deleted:
		r := *s.wire(c.msgs[m.replyTo], inCallback)
		r.ReplyToMessage = nil
		out.ReplyToMessage = &r
	case c.forum && m.thread != 0 && c.topics[m.thread] != nil:
		// In a topic, a message that replies to nothing replies to the
		// topic's creation message.
		out.ReplyToMessage = s.topicRoot(c, c.topics[m.thread], inCallback)
	}
	if m.content.rich != nil {
		out.RichMessage = m.content.rich.wire(m.content.text)
	} else if m.document == nil && m.voice == nil && m.photo == nil {
		out.Text, out.Entities = m.content.text, m.content.entities
	}
	if m.document != nil {
		out.Document = &models.Document{FileID: m.document.id, FileUniqueID: m.document.unique, FileName: m.document.name, MimeType: m.document.mime, FileSize: m.document.size}
	}
	if m.voice != nil {
		out.Voice = &models.Voice{FileID: m.voice.id, FileUniqueID: m.voice.unique, Duration: m.duration, MimeType: m.voice.mime, FileSize: m.voice.size}
	}
	for _, p := range m.photo {
		out.Photo = append(out.Photo, models.PhotoSize{FileID: p.id, FileUniqueID: p.unique, Width: p.width, Height: p.height, FileSize: int(p.size)})
	}
	if m.caption.text != "" {
		out.Caption, out.CaptionEntities = m.caption.text, m.caption.entities
	}
	if m.markup != nil {
		kb := *m.markup
		out.ReplyMarkup = &kb
	}
	return out
}

func (s *Server) topicRoot(c *chat, t *topic, inCallback bool) *models.Message {
	from := t.creator.wire()
	if t.byBot {
		b := s.bot
		from = &b
	}
	return &models.Message{
		ID: t.id, MessageThreadID: t.id, IsTopicMessage: true,
		From: from, Date: int(t.createdAt.Unix()), Chat: wireChat(c, inCallback),
		ForumTopicCreated: &models.ForumTopicCreated{Name: t.name, IconColor: t.color, IconCustomEmojiID: t.emoji},
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
