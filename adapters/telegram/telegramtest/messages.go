package telegramtest

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"
)

const (
	maxText     = 4096
	notModified = "message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"
)

// chatParam resolves chat_id. Callers hold s.mu.
func (s *Server) chatParam(r *request) (*chat, *Error) {
	v := strings.TrimSpace(r.p.str("chat_id"))
	if v == "" {
		return nil, badRequest("chat_id is empty")
	}
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, badRequest("chat not found")
	}
	r.chat = id
	c := s.chats[id]
	if c == nil {
		return nil, badRequest("chat not found")
	}
	return c, nil
}

// target resolves chat_id and message_thread_id of a send.
func (s *Server) target(r *request) (*chat, int, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, 0, e
	}
	thread, e := r.p.int("message_thread_id")
	if e != nil {
		return nil, 0, e
	}
	r.thread = int(thread)
	return c, int(thread), nil
}

// writable checks that the bot may post in a chat's thread.
func (s *Server) writable(c *chat, thread int) *Error {
	if c.blocked {
		return forbidden("bot was blocked by the user")
	}
	if thread == 0 {
		return nil
	}
	switch {
	case c.kind == kindPrivate:
		return badRequest("message thread not found")
	case c.forum:
		t := c.topics[thread]
		if t == nil || t.deleted {
			return badRequest("message thread not found")
		}
		if t.closed {
			return badRequest("TOPIC_CLOSED")
		}
	default:
		// Without topics a thread is a reply thread: its first message.
		if m := c.msgs[thread]; m == nil || m.deleted {
			return badRequest("message thread not found")
		}
	}
	return nil
}

// parseContent parses text in a parse mode and checks its visible length.
func parseContent(text, parseMode, entities string, limit int, tooLong string, allowEmpty bool) (content, *Error) {
	if !utf8.ValidString(text) {
		return content{}, badRequest("text must be encoded in UTF-8")
	}
	mode := strings.ToLower(parseMode)
	visible := text
	var ents []models.MessageEntity
	switch mode {
	case "":
		if entities != "" && json.Unmarshal([]byte(entities), &ents) != nil {
			return content{}, badRequest("can't parse entities JSON object")
		}
	case "html":
		v, parsed, err := parseHTML(text)
		if err != nil {
			return content{}, badRequest("can't parse entities: " + err.Error())
		}
		visible, ents = v, parsed
	case "markdown", "markdownv2":
		// Not parsed: the fake counts the source as visible text.
	default:
		return content{}, badRequest("unsupported parse_mode")
	}
	visible, ents = trimText(visible, ents)
	if visible == "" && !allowEmpty {
		return content{}, badRequest("message text is empty")
	}
	if utf16Count(visible) > limit {
		return content{}, badRequest(tooLong)
	}
	return content{text: visible, entities: ents, source: text, parseMode: mode}, nil
}

// parseRich parses rich_message.
func parseRich(raw, tooLong string) (content, *Error) {
	var ri richInput
	if raw == "" || json.Unmarshal([]byte(raw), &ri) != nil {
		return content{}, badRequest("can't parse rich message JSON object")
	}
	if !utf8.ValidString(ri.Markdown) || !utf8.ValidString(ri.HTML) {
		return content{}, badRequest("text must be encoded in UTF-8")
	}
	visible, err := ri.visible()
	if err != nil {
		return content{}, badRequest("can't parse entities: " + err.Error())
	}
	visible = strings.TrimSpace(visible)
	if visible == "" {
		return content{}, badRequest("message text is empty")
	}
	if utf16Count(visible) > maxRich {
		return content{}, badRequest(tooLong)
	}
	src := ri.Markdown
	if ri.HTML != "" {
		src = ri.HTML
	}
	return content{text: visible, source: src, rich: &ri}, nil
}

// parseMarkup reads reply_markup; only inline keyboards are kept (reply
// keyboards are accepted and ignored). An empty keyboard is none.
func parseMarkup(p params) (*models.InlineKeyboardMarkup, *Error) {
	raw := p.str("reply_markup")
	if raw == "" {
		return nil, nil
	}
	var probe map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &probe) != nil {
		return nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	if _, ok := probe["inline_keyboard"]; !ok {
		return nil, nil
	}
	var kb models.InlineKeyboardMarkup
	if json.Unmarshal([]byte(raw), &kb) != nil {
		return nil, badRequest("can't parse inline keyboard markup JSON object")
	}
	var rows [][]models.InlineKeyboardButton
	for _, row := range kb.InlineKeyboard {
		for _, b := range row {
			if len(b.CallbackData) > 64 {
				return nil, badRequest("BUTTON_DATA_INVALID")
			}
			if b.URL == "" && b.CallbackData == "" && b.WebApp == nil && b.LoginURL == nil && b.SwitchInlineQuery == nil &&
				b.SwitchInlineQueryCurrentChat == nil && b.SwitchInlineQueryChosenChat == nil && b.CopyText == nil &&
				b.CallbackGame == nil && !b.Pay && b.Disabled == nil {
				return nil, badRequest("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
			}
		}
		if len(row) > 0 {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return nil, nil
	}
	kb.InlineKeyboard = rows
	return &kb, nil
}

func sameMarkup(a, b *models.InlineKeyboardMarkup) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// replyTarget reads reply_parameters (or the older reply_to_message_id).
func replyTarget(c *chat, p params) (int, *Error) {
	var rp struct {
		MessageID                int  `json:"message_id"`
		AllowSendingWithoutReply bool `json:"allow_sending_without_reply"`
	}
	if !p.json("reply_parameters", &rp) {
		id, e := p.int("reply_to_message_id")
		if e != nil {
			return 0, e
		}
		rp.MessageID, rp.AllowSendingWithoutReply = int(id), p.bool("allow_sending_without_reply")
	}
	if rp.MessageID == 0 {
		return 0, nil
	}
	if m := c.msgs[rp.MessageID]; m == nil || m.deleted {
		if rp.AllowSendingWithoutReply {
			return 0, nil
		}
		return 0, badRequest("message to be replied not found")
	}
	return rp.MessageID, nil
}

func (s *Server) sendMessage(r *request) (any, *Error) {
	return s.send(r, func() (content, *Error) {
		return parseContent(r.p.str("text"), r.p.str("parse_mode"), r.p.str("entities"), maxText, "message is too long", false)
	})
}

func (s *Server) sendRichMessage(r *request) (any, *Error) {
	return s.send(r, func() (content, *Error) { return parseRich(r.p.str("rich_message"), "message is too long") })
}

func (s *Server) send(r *request, parse func() (content, *Error)) (any, *Error) {
	c, thread, e := s.target(r)
	if e != nil {
		return nil, e
	}
	if e := s.limit(r, c, thread); e != nil {
		return nil, e
	}
	if e := s.writable(c, thread); e != nil {
		return nil, e
	}
	ct, e := parse()
	if e != nil {
		return nil, e
	}
	markup, e := parseMarkup(r.p)
	if e != nil {
		return nil, e
	}
	replyTo, e := replyTarget(c, r.p)
	if e != nil {
		return nil, e
	}
	m := c.add(&message{thread: thread, fromBot: true, date: r.now, content: ct, markup: markup,
		silent: r.p.bool("disable_notification"), replyTo: replyTo})
	r.msgID = m.id
	s.endDrafts(c, thread)
	return s.wire(m, false), nil
}

// editTarget finds the message an edit or delete names, before the rate
// limit is applied (the limit is keyed by its topic).
func (s *Server) editTarget(r *request) (*chat, *message, *Error) {
	if r.p.str("inline_message_id") != "" && r.p.str("chat_id") == "" {
		return nil, nil, badRequest("MESSAGE_ID_INVALID")
	}
	c, e := s.chatParam(r)
	if e != nil {
		return nil, nil, e
	}
	id, e := r.p.int("message_id")
	if e != nil {
		return nil, nil, e
	}
	if id == 0 {
		return nil, nil, badRequest("message identifier is not specified")
	}
	r.msgID = int(id)
	m := c.msgs[int(id)]
	if m != nil {
		r.thread = m.thread
	}
	return c, m, nil
}

func (s *Server) editMessageText(r *request) (any, *Error) {
	c, m, e := s.editTarget(r)
	if e != nil {
		return nil, e
	}
	if e := s.limit(r, c, r.thread); e != nil {
		return nil, e
	}
	if m == nil || m.deleted {
		return nil, badRequest("message to edit not found")
	}
	if !m.fromBot {
		return nil, badRequest("message can't be edited")
	}
	if m.document != nil || m.voice != nil || m.photo != nil {
		return nil, badRequest("there is no text in the message to edit")
	}
	var ct content
	if raw := r.p.str("rich_message"); s.opts.RichMessages && raw != "" && raw != "null" {
		ct, e = parseRich(raw, "MESSAGE_TOO_LONG")
	} else {
		// A server without rich messages ignores rich_message.
		ct, e = parseContent(r.p.str("text"), r.p.str("parse_mode"), r.p.str("entities"), maxText, "MESSAGE_TOO_LONG", false)
	}
	if e != nil {
		return nil, e
	}
	// Editing the text without reply_markup removes the inline keyboard.
	markup, e := parseMarkup(r.p)
	if e != nil {
		return nil, e
	}
	if ct.same(m.content) && sameMarkup(markup, m.markup) {
		return nil, badRequest(notModified)
	}
	m.content, m.markup = ct, markup
	m.edits++
	m.editDate = r.now
	return s.wire(m, false), nil
}

func (s *Server) editMessageReplyMarkup(r *request) (any, *Error) {
	c, m, e := s.editTarget(r)
	if e != nil {
		return nil, e
	}
	if e := s.limit(r, c, r.thread); e != nil {
		return nil, e
	}
	if m == nil || m.deleted {
		return nil, badRequest("message to edit not found")
	}
	if !m.fromBot {
		return nil, badRequest("message can't be edited")
	}
	markup, e := parseMarkup(r.p)
	if e != nil {
		return nil, e
	}
	if sameMarkup(markup, m.markup) {
		return nil, badRequest(notModified)
	}
	m.markup = markup
	m.editDate = r.now
	return s.wire(m, false), nil
}

// deletable checks that the bot may delete m: its own messages and, in
// private chats, the person's; in groups other people's messages only as
// an administrator with can_delete_messages. Only messages younger than
// 48 hours can be deleted, unless the bot has that right in a group.
func deletable(c *chat, m *message, now time.Time) *Error {
	groupAdmin := c.kind != kindPrivate && c.rights.deleteMessages()
	if now.Sub(m.date) > 48*time.Hour && !groupAdmin {
		return badRequest("message can't be deleted for everyone")
	}
	if m.fromBot || c.kind == kindPrivate || groupAdmin {
		return nil
	}
	return badRequest("message can't be deleted")
}

func (s *Server) deleteMessage(r *request) (any, *Error) {
	c, m, e := s.editTarget(r)
	if e != nil {
		return nil, e
	}
	if e := s.limit(r, c, r.thread); e != nil {
		return nil, e
	}
	if m == nil || m.deleted {
		return nil, badRequest("message to delete not found")
	}
	if e := deletable(c, m, r.now); e != nil {
		return nil, e
	}
	m.deleted = true
	return true, nil
}

// deleteMessages deletes up to 100 messages; missing ones are skipped, as
// Telegram documents.
func (s *Server) deleteMessages(r *request) (any, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, e
	}
	var ids []int
	if !r.p.json("message_ids", &ids) || len(ids) == 0 {
		return nil, badRequest("message identifiers are not specified")
	}
	if len(ids) > 100 {
		return nil, badRequest("too many message identifiers specified")
	}
	var found []*message
	for _, id := range ids {
		if m := c.msgs[id]; m != nil && !m.deleted {
			found = append(found, m)
		}
	}
	if len(found) > 0 {
		r.thread, r.msgID = found[0].thread, found[0].id
	}
	if e := s.limit(r, c, r.thread); e != nil {
		return nil, e
	}
	for _, m := range found {
		if e := deletable(c, m, r.now); e != nil {
			return nil, e
		}
	}
	for _, m := range found {
		m.deleted = true
	}
	return true, nil
}

var chatActions = map[string]bool{
	"typing": true, "upload_photo": true, "record_video": true, "upload_video": true, "record_voice": true,
	"upload_voice": true, "upload_document": true, "choose_sticker": true, "find_location": true,
	"record_video_note": true, "upload_video_note": true,
}

func (s *Server) sendChatAction(r *request) (any, *Error) {
	c, thread, e := s.target(r)
	if e != nil {
		return nil, e
	}
	if e := s.writable(c, thread); e != nil {
		return nil, e
	}
	if !chatActions[r.p.str("action")] {
		return nil, badRequest("wrong parameter action in request")
	}
	return true, nil
}
