package telegramtest

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-telegram/bot/models"
)

// maxTopicName is the longest topic name.
const maxTopicName = 128

func (s *Server) getMe(*request) (any, *Error) {
	b := s.bot
	return &b, nil
}

func (s *Server) getChat(r *request) (any, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, e
	}
	wc := wireChat(c, false)
	return &models.ChatFullInfo{ID: wc.ID, Type: wc.Type, Title: wc.Title, Username: wc.Username,
		FirstName: wc.FirstName, LastName: wc.LastName, IsForum: wc.IsForum, AccentColorID: 1, MaxReactionCount: 11}, nil
}

// member is a user's ChatMember object in c.
func (s *Server) member(c *chat, userID int64) *models.ChatMember {
	if userID == s.bot.ID {
		b := s.bot
		if c.kind != kindPrivate && c.rights.Admin {
			return &models.ChatMember{Type: models.ChatMemberTypeAdministrator, Administrator: &models.ChatMemberAdministrator{
				User: b, CanManageChat: true, CanDeleteMessages: c.rights.DeleteMessages,
				CanManageTopics: c.rights.ManageTopics && c.forum, CanInviteUsers: true, CanPinMessages: true,
				CanRestrictMembers: true, CanChangeInfo: true, CanManageVideoChats: true,
			}}
		}
		return &models.ChatMember{Type: models.ChatMemberTypeMember, Member: &models.ChatMemberMember{User: &b}}
	}
	if c.kind != kindPrivate && userID == owner.ID {
		return &models.ChatMember{Type: models.ChatMemberTypeOwner, Owner: &models.ChatMemberOwner{User: owner.wire()}}
	}
	if u, ok := c.members[userID]; ok {
		return &models.ChatMember{Type: models.ChatMemberTypeMember, Member: &models.ChatMemberMember{User: u.wire()}}
	}
	return &models.ChatMember{Type: models.ChatMemberTypeLeft, Left: &models.ChatMemberLeft{User: &models.User{ID: userID}}}
}

func (s *Server) getChatMember(r *request) (any, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, e
	}
	uid, e := r.p.int("user_id")
	if e != nil {
		return nil, e
	}
	if uid == 0 {
		return nil, badRequest("user_id is empty")
	}
	return s.member(c, uid), nil
}

func (s *Server) getChatAdministrators(r *request) (any, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, e
	}
	if c.kind == kindPrivate {
		return nil, badRequest("there are no administrators in the private chat")
	}
	out := []models.ChatMember{*s.member(c, owner.ID)}
	if c.rights.Admin {
		out = append(out, *s.member(c, s.bot.ID))
	}
	return out, nil
}

// topicName checks a topic name: trimmed, 1-128 characters. Whether
// Telegram refuses or cuts longer names is not documented; the fake
// refuses, the stricter of the two, counting UTF-16 units.
func topicName(name string, required bool) (string, *Error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "" && required:
		return "", badRequest("title must be non-empty")
	case utf16Count(name) > maxTopicName:
		return "", badRequest("TOPIC_TITLE_TOO_LONG")
	}
	return name, nil
}

func (s *Server) createForumTopic(r *request) (any, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, e
	}
	if e := s.limit(r, c, 0); e != nil {
		return nil, e
	}
	if !c.forum {
		return nil, badRequest("the chat is not a forum")
	}
	if !c.rights.manageTopics() {
		return nil, badRequest("not enough rights to create a topic")
	}
	name, e := topicName(r.p.str("name"), true)
	if e != nil {
		return nil, e
	}
	color, e := r.p.int("icon_color")
	if e != nil {
		return nil, e
	}
	t := s.addTopic(c, name, int(color), r.p.str("icon_custom_emoji_id"), User{ID: s.bot.ID, FirstName: s.bot.FirstName, Username: s.bot.Username}, true)
	r.thread = t.id
	return &models.ForumTopic{MessageThreadID: t.id, Name: t.name, IconColor: t.color, IconCustomEmojiID: t.emoji}, nil
}

// topicTarget resolves the topic a topic method names, checking the bot's
// right to change it: the right need, or (creatorMay) having created it.
func (s *Server) topicTarget(r *request, need func(Rights) bool, creatorMay bool) (*chat, *topic, *Error) {
	c, e := s.chatParam(r)
	if e != nil {
		return nil, nil, e
	}
	id, e := r.p.int("message_thread_id")
	if e != nil {
		return nil, nil, e
	}
	r.thread = int(id)
	if e := s.limit(r, c, int(id)); e != nil {
		return nil, nil, e
	}
	if !c.forum {
		return nil, nil, badRequest("the chat is not a forum")
	}
	t := c.topics[int(id)]
	if t == nil || t.deleted {
		return nil, nil, badRequest("TOPIC_ID_INVALID")
	}
	if !need(c.rights) && !(creatorMay && t.byBot) {
		return nil, nil, badRequest("not enough rights to manage topics")
	}
	return c, t, nil
}

func (s *Server) editForumTopic(r *request) (any, *Error) {
	_, t, e := s.topicTarget(r, Rights.manageTopics, true)
	if e != nil {
		return nil, e
	}
	name, e := topicName(r.p.str("name"), false)
	if e != nil {
		return nil, e
	}
	emoji, hasEmoji := r.p.v["icon_custom_emoji_id"]
	if (name == "" || name == t.name) && (!hasEmoji || emoji == t.emoji) {
		return nil, badRequest("TOPIC_NOT_MODIFIED")
	}
	if name != "" {
		t.name = name
	}
	if hasEmoji {
		t.emoji = emoji
	}
	return true, nil
}

func (s *Server) closeForumTopic(r *request) (any, *Error) {
	return s.setTopicClosed(r, true)
}

func (s *Server) reopenForumTopic(r *request) (any, *Error) {
	return s.setTopicClosed(r, false)
}

func (s *Server) setTopicClosed(r *request, closed bool) (any, *Error) {
	_, t, e := s.topicTarget(r, Rights.manageTopics, true)
	if e != nil {
		return nil, e
	}
	if t.closed == closed {
		return nil, badRequest("TOPIC_NOT_MODIFIED")
	}
	t.closed = closed
	return true, nil
}

func (s *Server) deleteForumTopic(r *request) (any, *Error) {
	c, t, e := s.topicTarget(r, Rights.deleteMessages, false)
	if e != nil {
		return nil, e
	}
	s.removeTopic(c, t)
	return true, nil
}

// scopeKey reads a BotCommandScope and the language code.
func (s *Server) scopeKey(r *request) (CommandScope, *Error) {
	key := CommandScope{Type: "default", Language: r.p.str("language_code")}
	raw := r.p.str("scope")
	if raw == "" {
		return key, nil
	}
	var sc struct {
		Type   string          `json:"type"`
		ChatID json.RawMessage `json:"chat_id"`
		UserID int64           `json:"user_id"`
	}
	if json.Unmarshal([]byte(raw), &sc) != nil {
		return key, badRequest("can't parse BotCommandScope JSON object")
	}
	switch sc.Type {
	case "default", "all_private_chats", "all_group_chats", "all_chat_administrators":
		key.Type = sc.Type
		return key, nil
	case "chat", "chat_administrators", "chat_member":
	default:
		return key, badRequest("wrong bot command scope type specified")
	}
	key.Type = sc.Type
	id, err := strconv.ParseInt(strings.Trim(string(sc.ChatID), `"`), 10, 64)
	if err != nil || s.chats[id] == nil {
		return key, badRequest("chat not found")
	}
	key.Chat = id
	r.chat = id
	if sc.Type == "chat_member" {
		if sc.UserID == 0 {
			return key, badRequest("user not found")
		}
		key.User = sc.UserID
	}
	return key, nil
}

func (s *Server) setMyCommands(r *request) (any, *Error) {
	key, e := s.scopeKey(r)
	if e != nil {
		return nil, e
	}
	var cmds []models.BotCommand
	if !r.p.json("commands", &cmds) {
		return nil, badRequest("can't parse commands JSON object")
	}
	if len(cmds) > 100 {
		return nil, badRequest("too many commands specified")
	}
	for _, c := range cmds {
		if !validCommand(c.Command) {
			return nil, badRequest("BOT_COMMAND_INVALID")
		}
		if d := utf8.RuneCountInString(strings.TrimSpace(c.Description)); d == 0 || d > 256 {
			return nil, badRequest("BOT_COMMAND_DESCRIPTION_INVALID")
		}
	}
	if len(cmds) == 0 {
		delete(s.commands, key)
	} else {
		s.commands[key] = cmds
	}
	return true, nil
}

// validCommand: 1-32 characters, lowercase English letters, digits and
// underscores.
func validCommand(c string) bool {
	if c == "" || len(c) > 32 {
		return false
	}
	for i := 0; i < len(c); i++ {
		if !(c[i] >= 'a' && c[i] <= 'z' || c[i] >= '0' && c[i] <= '9' || c[i] == '_') {
			return false
		}
	}
	return true
}

func (s *Server) getMyCommands(r *request) (any, *Error) {
	key, e := s.scopeKey(r)
	if e != nil {
		return nil, e
	}
	return append([]models.BotCommand{}, s.commands[key]...), nil
}

func (s *Server) deleteMyCommands(r *request) (any, *Error) {
	key, e := s.scopeKey(r)
	if e != nil {
		return nil, e
	}
	delete(s.commands, key)
	return true, nil
}

type callback struct {
	chat    int64
	message int
	from    User
	data    string
	answers []CallbackAnswer
}

// CallbackAnswer is one answerCallbackQuery call for a query.
type CallbackAnswer struct {
	Text      string
	ShowAlert bool
	URL       string
	CacheTime int
	Time      time.Time
	// Err is the error description the call got ("" if it succeeded):
	// Telegram accepts one answer per query.
	Err string
}

// CallbackAnswers returns every answerCallbackQuery call for a query id
// (from Click), in order; a query answered exactly once has one, with no
// Err.
func (s *Server) CallbackAnswers(id string) []CallbackAnswer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cb := s.callbacks[id]; cb != nil {
		return append([]CallbackAnswer(nil), cb.answers...)
	}
	return nil
}

const queryTooOld = "query is too old and response timeout expired or query ID is invalid"

func (s *Server) answerCallbackQuery(r *request) (any, *Error) {
	cb := s.callbacks[r.p.str("callback_query_id")]
	if cb == nil {
		return nil, badRequest(queryTooOld)
	}
	r.chat, r.msgID = cb.chat, cb.message
	cache, _ := r.p.int("cache_time")
	a := CallbackAnswer{Text: r.p.str("text"), ShowAlert: r.p.bool("show_alert"), URL: r.p.str("url"), CacheTime: int(cache), Time: r.now}
	var e *Error
	if len(cb.answers) > 0 {
		e = badRequest(queryTooOld)
		a.Err = e.Description
	}
	cb.answers = append(cb.answers, a)
	if e != nil {
		return nil, e
	}
	return true, nil
}
