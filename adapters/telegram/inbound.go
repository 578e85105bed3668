package telegram

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// maxDownload is the Bot API's getFile limit.
const maxDownload = 20 << 20

// handle turns one update into commands for h, retrying while h fails for a
// reason other than the update itself. It returns an error only when ctx
// ended first (the update was not dealt with).
func (a *Adapter) handle(ctx context.Context, h core.Handler, u *models.Update) error {
	retry := inbound.Retry{Log: a.log, What: "update"}
	return retry.Do(ctx, func(ctx context.Context) error { return a.dispatch(ctx, h, u) }, "update_id", u.ID)
}

// dispatch handles one update; its error means "try again".
func (a *Adapter) dispatch(ctx context.Context, h core.Handler, u *models.Update) error {
	switch {
	case u.Message != nil:
		return a.onMessage(ctx, h, u.Message)
	case u.EditedMessage != nil:
		// Decision: an edit is not sent again. The agent has the original
		// and may be acting on it; a changed mind is a new message.
		a.log.Debug("ignoring an edited message", "chat", u.EditedMessage.Chat.ID, "message", u.EditedMessage.ID)
		return nil
	case u.CallbackQuery != nil:
		return a.onCallback(ctx, h, u.CallbackQuery)
	}
	return nil
}

func actor(u *models.User) core.Actor {
	name := strings.TrimSpace(u.FirstName + " " + u.LastName)
	if name == "" {
		name = u.Username
	}
	return core.Actor{ID: strconv.FormatInt(u.ID, 10), Name: name}
}

// input is how the adapter deals with people's input, in Telegram's words:
// the commands that help after a refusal start with "/".
func (a *Adapter) input() inbound.Input {
	return inbound.Input{Log: a.log, PlaceKey: "chat", AfterClosed: "/new starts another one.", NoSession: "/new starts one."}
}

func (a *Adapter) onMessage(ctx context.Context, h core.Handler, m *models.Message) error {
	if m.From == nil || m.From.IsBot {
		return nil
	}
	if a.opts.ChatID != 0 && m.Chat.ID != a.opts.ChatID && m.Chat.Type != models.ChatTypePrivate {
		a.log.Debug("ignoring a message from another group", "chat", m.Chat.ID)
		return nil
	}
	// The allow-list first: before a topic is created or a file fetched
	// for someone the handler would refuse, and before anything is said
	// to them.
	if !a.opts.Authorizer.Authorized(core.Origin(Name), actor(m.From)) {
		a.log.Debug("ignoring a message from someone not allowed", "user", m.From.ID, "chat", m.Chat.ID)
		if m.Chat.Type == models.ChatTypePrivate && a.pairs() {
			// With pairing on, the handler answers with a one-time code
			// for the operator; otherwise it refuses silently. Groups
			// never hear a word.
			return a.pair(ctx, h, core.Command{Kind: core.Pair, Origin: core.Origin(Name), Actor: actor(m.From), Place: place(m.Chat.ID, 0)})
		}
		return nil
	}
	thread := 0
	if m.IsTopicMessage {
		thread = m.MessageThreadID
	}
	p := place(m.Chat.ID, thread)
	base := core.Command{Origin: core.Origin(Name), Actor: actor(m.From), Place: p,
		PlatformID: fmt.Sprintf("%d:%d", m.Chat.ID, m.ID), Ref: ref(p, m.ID)}

	text := m.Text
	if text == "" {
		text = m.Caption
	}
	newSession := func(ctx context.Context, title, agent string) error {
		_, err := a.newSession(ctx, h, m, base, title, agent)
		return err
	}
	if ok, err := a.input().Command(ctx, h, base, inbound.Commands{Parser: a.parser(), New: newSession}, text); ok {
		return err
	}
	isForumGeneral := m.Chat.IsForum && thread == 0
	if isForumGeneral && !a.opts.NewFromGeneral {
		a.input().Notice(ctx, h, base, "Each session has its own topic. Send /new [title] to start one.")
		return nil
	}
	if isForumGeneral {
		// The message starts a session, titled by its first line, and is
		// the session's first message. Both commands carry the update's
		// ids, so a redelivery repeats neither.
		title, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
		title = shorten(title, 60)
		created := base
		created.PlatformID = "new:" + base.PlatformID
		id, err := a.newSession(ctx, h, m, created, title, "")
		if err != nil || id == "" {
			return err
		}
		base.Session = id
	}
	switch {
	case m.Voice != nil:
		return a.onVoice(ctx, h, base, m.Voice)
	case m.Document != nil:
		return a.onFile(ctx, h, base, m.Document.FileID, m.Document.FileName, m.Document.MimeType, m.Document.FileSize, text)
	case len(m.Photo) > 0:
		ph := m.Photo[len(m.Photo)-1] // the largest size
		return a.onFile(ctx, h, base, ph.FileID, fmt.Sprintf("photo-%d.jpg", m.ID), "image/jpeg", int64(ph.FileSize), text)
	case strings.TrimSpace(text) == "":
		return nil // stickers, service messages: nothing for the agent
	}
	cmd := base
	cmd.Kind, cmd.Text = core.SendMessage, withQuote(m, thread, text)
	_, err := a.input().Submit(ctx, h, base, cmd)
	return err
}

// parser recognises Telegram's commands: "/", optionally addressed to the
// bot ("/cancel@parley_bot", as Telegram's menu writes them in groups).
// Before Check has learnt the bot's name, an addressed command is text.
func (a *Adapter) parser() chatcmd.Parser {
	p := chatcmd.Parser{Prefix: "/"}
	if me := a.me.Load(); me != nil {
		p.Bot = me.Username
	}
	return p
}

// newSession starts a session run with agent ("" for the default): in the
// group it gets a new topic (the session is bound there at once), in a
// private chat the chat itself.
// createForumTopic cannot be made idempotent: if parley dies between
// creating the topic and storing the session, the redelivered /new makes a
// second topic (the first stays empty).
func (a *Adapter) newSession(ctx context.Context, h core.Handler, m *models.Message, base core.Command, title, agent string) (core.SessionID, error) {
	cmd := base
	cmd.Kind, cmd.Title, cmd.Agent, cmd.Ref = core.CreateSession, title, agent, core.MessageRef{}
	if m.Chat.Type != models.ChatTypePrivate {
		if !m.Chat.IsForum {
			a.input().Notice(ctx, h, base, "This group has no topics; enable Topics in its settings so each session gets one.")
			return "", nil
		}
		if title == "" {
			// The topic needs a name before the session exists.
			title = inbound.PlaceholderTitle(time.Now())
			cmd.Title, cmd.Placeholder = title, true
		}
		thread, err := a.createTopic(ctx, m.Chat.ID, title)
		if err != nil {
			if core.IsPermanent(err) {
				a.input().Notice(ctx, h, base, "⚠️ Could not create a topic: "+err.Error())
				return "", nil
			}
			return "", err
		}
		cmd.Place = place(m.Chat.ID, thread)
	}
	res, err := a.input().Submit(ctx, h, base, cmd)
	return res.Session, err
}

// createTopic creates a forum topic for a new session in chat, paced by
// the outbox (creating a topic counts against the group's budget, and a
// 429 for the group must hold it back too), one at a time.
func (a *Adapter) createTopic(ctx context.Context, chat int64, title string) (thread int, err error) {
	create := func(ctx context.Context, _ core.Place) error {
		a.topicMu.Lock()
		defer a.topicMu.Unlock()
		topic, err := a.bot.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: chat, Name: topicName(delivery.StatusMark(core.StatusIdle) + " " + title)})
		if err != nil {
			return classify("create topic", err)
		}
		thread = topic.MessageThreadID
		return nil
	}
	if a.opts.Pacer == nil {
		return thread, create(ctx, core.Place{})
	}
	err = a.opts.Pacer.Do(ctx, core.Op{Kind: core.OpSend, Adapter: Name, Place: place(chat, 0), Run: create})
	return thread, err
}

func (a *Adapter) onCallback(ctx context.Context, h core.Handler, cq *models.CallbackQuery) error {
	answer := func(text string) {
		_, err := a.bot.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: cq.ID, Text: text})
		if err != nil {
			// A redelivered click was answered already: "query is too old".
			a.log.Debug("answer callback query", "err", err)
		}
	}
	data, ok := strings.CutPrefix(cq.Data, buttonPrefix)
	qid, option, valid := delivery.ParseButtonData(data)
	if !ok || !valid {
		answer("")
		return nil
	}
	var p core.Place
	if msg := cq.Message.Message; msg != nil {
		thread := 0
		if msg.IsTopicMessage || msg.MessageThreadID != 0 {
			thread = msg.MessageThreadID
		}
		p = place(msg.Chat.ID, thread)
	}
	cmd := core.Command{Kind: core.Answer, Origin: core.Origin(Name), Actor: actor(&cq.From), Place: p,
		PlatformID: "cb:" + cq.ID, QuestionID: qid, Option: option}
	_, err := h.Handle(ctx, cmd)
	switch {
	case err == nil:
		answer("✓")
	case errors.Is(err, core.ErrUnauthorized):
		answer("") // silently: stop the spinner, say nothing
	case errors.Is(err, core.ErrInvalid), errors.Is(err, core.ErrNotFound), errors.Is(err, core.ErrSessionClosed):
		answer("This question is no longer open.")
	default:
		return err
	}
	return nil
}

// withQuote prefixes a reply with the start of the message it answers, so
// the agent knows what "yes, that one" refers to. Messages in a topic look
// like replies to the topic's first message; those are not quoted.
func withQuote(m *models.Message, thread int, text string) string {
	r := m.ReplyToMessage
	if r == nil || (thread != 0 && r.ID == thread) {
		return text
	}
	quoted := r.Text
	if quoted == "" {
		quoted = r.Caption
	}
	quoted, _, _ = strings.Cut(strings.TrimSpace(quoted), "\n")
	if quoted == "" {
		return text
	}
	return "> " + shorten(quoted, 200) + "\n\n" + text
}

// pair asks the handler to pair a stranger who wrote in a private chat;
// only a failure to store the request is worth a redelivery.
func (a *Adapter) pair(ctx context.Context, h core.Handler, cmd core.Command) error {
	_, err := h.Handle(ctx, cmd)
	if err == nil || errors.Is(err, core.ErrUnauthorized) || errors.Is(err, core.ErrInvalid) {
		return nil
	}
	return err
}

// pairs reports whether a stranger's private message is answered with a
// pairing code.
func (a *Adapter) pairs() bool { return a.opts.Pairer != nil && a.opts.Pairer.Pairing() }
