package telegram

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

const (
	cursorOffset = "telegram.offset"
	cursorRich   = "telegram.rich"
	// buttonPrefix marks parley's callback data; the rest is core's
	// ButtonData (at most 48 bytes), within Telegram's 64.
	buttonPrefix = "q:"
	// maxTopicName is Telegram's limit for forum topic names.
	maxTopicName = 128
)

// keyboard renders a question's options, one button a row.
func keyboard(bs []core.Button) models.ReplyMarkup {
	if len(bs) == 0 {
		return nil
	}
	rows := make([][]models.InlineKeyboardButton, 0, len(bs))
	for _, b := range bs {
		rows = append(rows, []models.InlineKeyboardButton{{Text: b.Label, CallbackData: buttonPrefix + b.Data}})
	}
	return &models.InlineKeyboardMarkup{InlineKeyboard: rows}
}

// Send implements core.Adapter. It sends a rich message (Telegram renders
// the markdown) where the server supports them, and otherwise HTML rendered
// from the markdown, falling back to plain text when Telegram cannot parse
// the HTML rather than losing the message.
func (a *Adapter) Send(ctx context.Context, p core.Place, m core.OutMessage) (core.MessageRef, error) {
	chat, err := chatID(p)
	if err != nil {
		return core.MessageRef{}, err
	}
	thread := threadID(p)
	if a.rich.Load() != richNo {
		msg, err := a.bot.SendRichMessage(ctx, &bot.SendRichMessageParams{ChatID: chat, MessageThreadID: thread,
			RichMessage: models.InputRichMessage{Markdown: m.Text}, DisableNotification: m.Silent, ReplyMarkup: keyboard(m.Buttons)})
		switch {
		case err == nil:
			a.learnRich(ctx, richYes)
			return ref(p, msg.ID), nil
		case richUnsupported(err):
			a.learnRich(ctx, richNo)
		default:
			return core.MessageRef{}, classify("send rich message", err)
		}
	}
	params := &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: htmlOf(m.Text),
		ParseMode: models.ParseModeHTML, DisableNotification: m.Silent, ReplyMarkup: keyboard(m.Buttons)}
	msg, err := a.bot.SendMessage(ctx, params)
	if isParseError(err) {
		a.log.Warn("Telegram could not parse the HTML; sending plain text", "err", err)
		params.Text, params.ParseMode = markdown.Render(m.Text, markdown.Plain), ""
		msg, err = a.bot.SendMessage(ctx, params)
	}
	if err != nil {
		return core.MessageRef{}, classify("send message", err)
	}
	return ref(p, msg.ID), nil
}

// htmlOf renders markdown for HTML parse mode. Markdown that renders to
// nothing visible (only link definitions) is sent escaped as it was
// written, since Telegram refuses empty messages.
func htmlOf(md string) string {
	if out := markdown.Render(md, markdown.TelegramHTML); markdown.VisibleLength(out) > 0 {
		return out
	}
	return html.EscapeString(md)
}

// RenderedLength is the length Telegram counts for md as the adapter sends
// it, for a core that cuts long output by rendered length: the UTF-16 code
// units of the visible text of its HTML rendering, or of the plain text
// sent instead when Telegram cannot parse that HTML, whichever is longer,
// so that either fits. Rich messages are measured the same way: Telegram
// renders their markdown itself and counts its own visible text, which
// parley cannot know, and a rich send the server refuses falls back to the
// HTML.
func (a *Adapter) RenderedLength(md string) int {
	return max(markdown.VisibleLength(htmlOf(md)), markdown.Measure(md, markdown.Plain))
}

// probeRich learns whether the server speaks rich messages before the first
// message needs to know: the length core cuts a final output to depends on
// it, and a long first output cut to HTML's 4096 would stay split in
// several messages where one rich message would do. The probe has no
// effect: a sendRichMessage to chat 0 is answered "chat not found" by a
// server that has the method and 404 by one that has not. Any other
// answer (unreachable, 429) leaves it to the first send, as before.
func (a *Adapter) probeRich(ctx context.Context) {
	if a.rich.Load() != richUnknown {
		return
	}
	_, err := a.bot.SendRichMessage(ctx, &bot.SendRichMessageParams{ChatID: 0, RichMessage: models.InputRichMessage{Markdown: "?"}})
	switch {
	case errors.Is(err, bot.ErrorNotFound):
		a.learnRich(ctx, richNo)
	case errors.Is(err, bot.ErrorBadRequest):
		a.learnRich(ctx, richYes)
	}
}

// learnRich remembers, durably, whether the server speaks rich messages.
func (a *Adapter) learnRich(ctx context.Context, v int32) {
	if a.rich.Swap(v) == v {
		return
	}
	word := map[int32]string{richYes: "yes", richNo: "no"}[v]
	a.log.Info("Bot API rich messages", "supported", word)
	if err := a.opts.Cursors.SetCursor(context.WithoutCancel(ctx), cursorRich, word); err != nil {
		a.log.Warn("remember rich-message support", "err", err)
	}
}

// Edit implements core.Editor.
func (a *Adapter) Edit(ctx context.Context, r core.MessageRef, m core.OutMessage) error {
	chat, err := chatID(r.Place)
	if err != nil {
		return err
	}
	id, err := strconv.Atoi(r.ID)
	if err != nil {
		return core.Permanent(fmt.Errorf("telegram: bad message id %q", r.ID))
	}
	if a.rich.Load() == richYes {
		_, err := a.bot.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: id,
			RichMessage: &models.InputRichMessage{Markdown: m.Text}, ReplyMarkup: keyboard(m.Buttons)})
		if !richUnsupported(err) {
			return classify("edit rich message", err)
		}
		a.learnRich(ctx, richNo)
	}
	params := &bot.EditMessageTextParams{ChatID: chat, MessageID: id, Text: htmlOf(m.Text),
		ParseMode: models.ParseModeHTML, ReplyMarkup: keyboard(m.Buttons)}
	_, err = a.bot.EditMessageText(ctx, params)
	if isParseError(err) {
		a.log.Warn("Telegram could not parse the HTML; editing to plain text", "err", err)
		params.Text, params.ParseMode = markdown.Render(m.Text, markdown.Plain), ""
		_, err = a.bot.EditMessageText(ctx, params)
	}
	return classify("edit message", err)
}

// Delete implements core.Deleter.
func (a *Adapter) Delete(ctx context.Context, r core.MessageRef) error {
	chat, err := chatID(r.Place)
	if err != nil {
		return err
	}
	id, err := strconv.Atoi(r.ID)
	if err != nil {
		return core.Permanent(fmt.Errorf("telegram: bad message id %q", r.ID))
	}
	_, err = a.bot.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: chat, MessageID: id})
	return classify("delete message", err)
}

// topicName fits a title into Telegram's topic name limit.
func topicName(title string) string { return shorten(title, maxTopicName) }

// shorten cuts s to at most max bytes, cutting at a character boundary
// and marking the cut with "…".
func shorten(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ShowStatus implements core.StatusShower: the forum topic's name is the
// status emoji and the title. Private chats have no title to set.
func (a *Adapter) ShowStatus(ctx context.Context, b core.Binding, v core.StatusView) (json.RawMessage, error) {
	p := b.Place
	if p.Thread == "" {
		return nil, nil
	}
	chat, err := chatID(p)
	if err != nil {
		return nil, err
	}
	_, err = a.bot.EditForumTopic(ctx, &bot.EditForumTopicParams{ChatID: chat, MessageThreadID: threadID(p), Name: topicName(statusTitle(v))})
	if err != nil && contains(err, descNotModified, "TOPIC_NOT_MODIFIED") {
		return nil, nil
	}
	return nil, classify("rename topic", err)
}

// statusTitle is how a topic name shows a session: its status as an emoji,
// then its title.
func statusTitle(v core.StatusView) string { return delivery.StatusMark(v.Status) + " " + v.Title }

// BindPlace implements core.BindPlacer: topics are created in the group,
// and that counts against its budget.
func (a *Adapter) BindPlace() core.Place { return place(a.opts.ChatID, 0) }

// Bind implements core.Binder: a session that started elsewhere gets a
// forum topic in the configured group. Topics are created one at a time.
func (a *Adapter) Bind(ctx context.Context, s core.Session) (core.Binding, error) {
	if a.opts.ChatID == 0 {
		return core.Binding{}, core.Permanent(fmt.Errorf("telegram: no group configured for sessions started elsewhere (set [telegram] chat_id): %w", core.ErrUnsupported))
	}
	a.topicMu.Lock()
	defer a.topicMu.Unlock()
	v := core.StatusView{Title: s.Title, Status: s.Status}
	topic, err := a.bot.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: a.opts.ChatID, Name: topicName(statusTitle(v))})
	if err != nil {
		return core.Binding{}, classify("create topic", err)
	}
	// The new topic's name already shows the status: no rename follows.
	return core.Binding{Place: place(a.opts.ChatID, topic.MessageThreadID), Shown: v}, nil
}

// SendFile implements core.FileSender: the file goes as a document.
func (a *Adapter) SendFile(ctx context.Context, p core.Place, f core.Attachment, body io.Reader, caption string) (core.MessageRef, error) {
	chat, err := chatID(p)
	if err != nil {
		return core.MessageRef{}, err
	}
	msg, err := a.bot.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, MessageThreadID: threadID(p),
		Document: &models.InputFileUpload{Filename: f.Name, Data: body}, Caption: caption, DisableNotification: true})
	if err != nil {
		return core.MessageRef{}, classify("send document", err)
	}
	return ref(p, msg.ID), nil
}

// Typing implements core.TypingNotifier.
func (a *Adapter) Typing(ctx context.Context, p core.Place) error {
	chat, err := chatID(p)
	if err != nil {
		return err
	}
	_, err = a.bot.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: chat, MessageThreadID: threadID(p), Action: models.ChatActionTyping})
	return classify("typing", err)
}

// registerCommands publishes the slash commands for the group (and for
// private chats with the bot).
func (a *Adapter) registerCommands(ctx context.Context) error {
	var cmds []models.BotCommand
	for _, s := range a.parser().Table() {
		desc := s.Help
		if s.Args != "" {
			desc += " (" + s.Args + ")"
		}
		cmds = append(cmds, models.BotCommand{Command: s.Name, Description: desc})
	}
	if a.opts.ChatID != 0 {
		if _, err := a.bot.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: cmds,
			Scope: &models.BotCommandScopeChat{ChatID: a.opts.ChatID}}); err != nil {
			return err
		}
	}
	_, err := a.bot.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: cmds, Scope: &models.BotCommandScopeAllPrivateChats{}})
	return err
}
