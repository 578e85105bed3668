package telegramtest

import (
	"strconv"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"
)

// SendText makes from write text in a chat's thread (0: General, or the
// chat without topics) and queues the update. Commands get bot_command
// entities as Telegram gives them. It returns the message id.
func (s *Server) SendText(chatID int64, thread int, from User, text string) int {
	s.tb.Helper()
	return s.SendReply(chatID, thread, from, 0, text)
}

// SendReply is SendText replying to message replyTo (0: no reply).
func (s *Server) SendReply(chatID int64, thread int, from User, replyTo int, text string) int {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	m := s.personMessage(c, thread, from)
	m.replyTo = replyTo
	m.content = content{text: text, source: text, entities: detectEntities(text)}
	s.enqueue("message", &models.Update{Message: s.wire(m, false)})
	return m.id
}

// EditText makes the author of a person's message edit it, queueing an
// edited_message update.
func (s *Server) EditText(chatID int64, id int, text string) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	m := c.msgs[id]
	if m == nil || m.fromBot {
		s.tb.Fatalf("telegramtest: no person's message %d in chat %d", id, chatID)
	}
	m.content = content{text: text, source: text, entities: detectEntities(text)}
	m.edits++
	m.editDate = s.now()
	s.enqueue("edited_message", &models.Update{EditedMessage: s.wire(m, false)})
}

// DeleteMessage deletes a message as a person (or another admin) would;
// the bot is not told.
func (s *Server) DeleteMessage(chatID int64, id int) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.mustChat(chatID).msgs[id]; m != nil {
		m.deleted = true
	}
	s.changed()
}

// File is a file a person sends.
type File struct {
	Name    string
	MIME    string
	Content []byte
	// Size is the size Telegram reports when larger than Content, to stand
	// for a big file without allocating it.
	Size    int64
	Caption string
}

// SendDocument makes from send a file as a document.
func (s *Server) SendDocument(chatID int64, thread int, from User, name, mimeType string, data []byte) int {
	s.tb.Helper()
	return s.SendFile(chatID, thread, from, File{Name: name, MIME: mimeType, Content: data})
}

// SendFile makes from send f as a document, with its caption.
func (s *Server) SendFile(chatID int64, thread int, from User, f File) int {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	m := s.personMessage(c, thread, from)
	m.document = s.addFile("documents", f.Name, f.MIME, f.Content, f.Size)
	m.caption = content{text: f.Caption, source: f.Caption, entities: detectEntities(f.Caption)}
	s.enqueue("message", &models.Update{Message: s.wire(m, false)})
	return m.id
}

// SendVoice makes from send a voice note (OGG/Opus) of duration seconds.
func (s *Server) SendVoice(chatID int64, thread int, from User, ogg []byte, duration int) int {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	m := s.personMessage(c, thread, from)
	m.voice = s.addFile("voice", "", "audio/ogg", ogg, 0)
	m.duration = duration
	s.enqueue("message", &models.Update{Message: s.wire(m, false)})
	return m.id
}

// SendPhoto makes from send a photo (JPEG or PNG), with a caption.
// Telegram offers it in several sizes; each is a file of its own, the last
// the largest.
func (s *Server) SendPhoto(chatID int64, thread int, from User, image []byte, caption string) int {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	m := s.personMessage(c, thread, from)
	m.photo = s.addPhoto(image)
	m.caption = content{text: caption, source: caption, entities: detectEntities(caption)}
	s.enqueue("message", &models.Update{Message: s.wire(m, false)})
	return m.id
}

// Click makes from press the inline button with callback data on a
// message, queueing a callback_query. data need not match a button, so
// tests can forge stale or foreign clicks. It returns the query id to look
// up with CallbackAnswers.
func (s *Server) Click(chatID int64, messageID int, from User, data string) string {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	m := c.msgs[messageID]
	if m == nil {
		s.tb.Fatalf("telegramtest: no message %d in chat %d", messageID, chatID)
	}
	s.nextQuery++
	id := strconv.FormatInt(s.nextQuery, 10)
	s.callbacks[id] = &callback{chat: chatID, message: messageID, from: from, data: data}
	q := &models.CallbackQuery{ID: id, From: *from.wire(), ChatInstance: "-" + itoa(chatID*7+3), Data: data}
	if m.deleted {
		q.Message = models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeInaccessibleMessage,
			InaccessibleMessage: &models.InaccessibleMessage{Chat: wireChat(c, true), MessageID: m.id}}
	} else {
		q.Message = models.MaybeInaccessibleMessage{Type: models.MaybeInaccessibleMessageTypeMessage, Message: s.wire(m, true)}
	}
	s.enqueue("callback_query", &models.Update{CallbackQuery: q})
	return id
}

// NewTopic makes a person create a forum topic; the bot gets the
// forum_topic_created service message. It returns the topic's id.
func (s *Server) NewTopic(chatID int64, name string) int {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	t := s.addTopic(c, name, 0, "", owner, false)
	s.enqueue("message", &models.Update{Message: s.topicRoot(c, t, false)})
	return t.id
}

// CloseTopic makes a person close a forum topic; the bot gets the
// forum_topic_closed service message, and sends to the topic fail with
// "Bad Request: TOPIC_CLOSED".
func (s *Server) CloseTopic(chatID int64, thread int) {
	s.tb.Helper()
	s.topicService(chatID, thread, func(t *topic, sm *models.Message) {
		t.closed = true
		sm.ForumTopicClosed = &models.ForumTopicClosed{}
	})
}

// ReopenTopic makes a person reopen a closed forum topic.
func (s *Server) ReopenTopic(chatID int64, thread int) {
	s.tb.Helper()
	s.topicService(chatID, thread, func(t *topic, sm *models.Message) {
		t.closed = false
		sm.ForumTopicReopened = &models.ForumTopicReopened{}
	})
}

// RenameTopic makes a person rename a forum topic.
func (s *Server) RenameTopic(chatID int64, thread int, name string) {
	s.tb.Helper()
	s.topicService(chatID, thread, func(t *topic, sm *models.Message) {
		t.name = name
		sm.ForumTopicEdited = &models.ForumTopicEdited{Name: name}
	})
}

// DeleteTopic makes a person delete a forum topic with all its messages;
// the bot is not told. Sends to it then fail with "Bad Request: message
// thread not found", edits with "message to edit not found".
func (s *Server) DeleteTopic(chatID int64, thread int) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	t := c.topics[thread]
	if t == nil {
		s.tb.Fatalf("telegramtest: no topic %d in chat %d", thread, chatID)
	}
	s.removeTopic(c, t)
	s.changed()
}

func (s *Server) removeTopic(c *chat, t *topic) {
	t.deleted = true
	for _, m := range c.msgs {
		if m.thread == t.id {
			m.deleted = true
		}
	}
}

// topicService applies a person's change to a topic and queues the
// service message announcing it.
func (s *Server) topicService(chatID int64, thread int, apply func(*topic, *models.Message)) {
	s.tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.mustChat(chatID)
	t := c.topics[thread]
	if t == nil || t.deleted {
		s.tb.Fatalf("telegramtest: no topic %d in chat %d", thread, chatID)
	}
	c.nextMsg++
	sm := &models.Message{ID: c.nextMsg, MessageThreadID: t.id, IsTopicMessage: true, From: owner.wire(),
		Date: int(s.now().Unix()), Chat: wireChat(c, false), ReplyToMessage: s.topicRoot(c, t, false)}
	apply(t, sm)
	s.enqueue("message", &models.Update{Message: sm})
}

// personMessage adds an empty message by from. Callers hold s.mu.
func (s *Server) personMessage(c *chat, thread int, from User) *message {
	s.tb.Helper()
	if thread != 0 && c.forum && (c.topics[thread] == nil || c.topics[thread].deleted) {
		s.tb.Fatalf("telegramtest: no topic %d in chat %d", thread, c.id)
	}
	c.members[from.ID] = from
	return c.add(&message{thread: thread, from: from, date: s.now()})
}

func (s *Server) addTopic(c *chat, name string, color int, emoji string, creator User, byBot bool) *topic {
	if color == 0 {
		color = defaultTopicColor
	}
	c.nextMsg++ // a topic's id is its creation message's
	t := &topic{id: c.nextMsg, name: name, color: color, emoji: emoji, creator: creator, byBot: byBot, createdAt: s.now()}
	c.topics[t.id] = t
	c.tOrder = append(c.tOrder, t.id)
	return t
}

// detectEntities finds the bot commands Telegram marks in a person's text:
// "/word" or "/word@botname" at the start or after white space.
func detectEntities(text string) []models.MessageEntity {
	if !utf8.ValidString(text) {
		return nil
	}
	word := func(c byte) bool { return isAlnum(c) || c == '_' }
	var ents []models.MessageEntity
	for i := 0; i < len(text); i++ {
		if text[i] != '/' || i > 0 && !isSpace(text[i-1]) {
			continue
		}
		j := i + 1
		for j < len(text) && word(text[j]) {
			j++
		}
		if j == i+1 || j-i-1 > 64 {
			continue
		}
		if j < len(text) && text[j] == '@' {
			k := j + 1
			for k < len(text) && word(text[k]) {
				k++
			}
			if n := k - j - 1; n >= 3 && n <= 32 {
				j = k
			}
		}
		if j < len(text) && (word(text[j]) || text[j] == '/' || text[j] == '@') {
			continue
		}
		ents = append(ents, models.MessageEntity{
			Type:   models.MessageEntityTypeBotCommand,
			Offset: utf16Count(text[:i]),
			Length: utf16Count(text[i:j]),
		})
		i = j - 1
	}
	return ents
}
