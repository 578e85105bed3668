package telegramtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

var alice = telegramtest.User{ID: 501, FirstName: "Alice", Username: "alice"}

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newBot(tb testing.TB, srv *telegramtest.Server, opts ...bot.Option) *bot.Bot {
	tb.Helper()
	opts = append([]bot.Option{bot.WithServerURL(srv.URL), bot.WithSkipGetMe(), bot.WithErrorsHandler(func(error) {})}, opts...)
	b, err := bot.New(srv.Token, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// wantBadRequest checks that err is a 400 wrapping bot.ErrorBadRequest
// whose description contains desc.
func wantBadRequest(tb testing.TB, err error, desc string) {
	tb.Helper()
	if !errors.Is(err, bot.ErrorBadRequest) || !strings.Contains(err.Error(), desc) {
		tb.Fatalf("error = %v, want a bad request saying %q", err, desc)
	}
}

func createTopic(tb testing.TB, b *bot.Bot, chat int64, name string) int {
	tb.Helper()
	topic, err := b.CreateForumTopic(context.Background(), &bot.CreateForumTopicParams{ChatID: chat, Name: name})
	if err != nil {
		tb.Fatal(err)
	}
	return topic.MessageThreadID
}

func send(b *bot.Bot, chat int64, thread int, text string) (*models.Message, error) {
	return b.SendMessage(context.Background(), &bot.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: text, ParseMode: models.ParseModeHTML})
}

func TestRateLimits(t *testing.T) {
	clk := newClock()
	srv := telegramtest.NewServer(t, telegramtest.Options{Limits: true, Now: clk.Now})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	ctx := context.Background()

	thread := createTopic(t, b, forum, "one")
	clk.Advance(time.Second)
	if _, err := send(b, forum, thread, "first"); err != nil {
		t.Fatal(err)
	}
	_, err := send(b, forum, thread, "second")
	var tooMany *bot.TooManyRequestsError
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 1 {
		t.Fatalf("second send in a second: %v, want 429 with retry_after 1", err)
	}
	if !strings.Contains(err.Error(), "Too Many Requests: retry after 1") {
		t.Errorf("description: %v", err)
	}
	if srv.RateLimited() != 1 {
		t.Errorf("RateLimited = %d, want 1", srv.RateLimited())
	}
	// Edits count too.
	msgs := srv.Messages(forum, thread)
	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: msgs[0].ID, Text: "edited"})
	if !errors.As(err, &tooMany) {
		t.Fatalf("edit in the same second: %v, want 429", err)
	}
	clk.Advance(time.Second)
	if _, err := send(b, forum, thread, "second"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	clk.Advance(time.Second)

	// 20 a minute per group, shared by its topics: 3 calls so far
	// (createForumTopic at 0s, sends at 1s and 2s); 17 more pass in the
	// General topic, one a second as the chat allows (3s to 19s), and the
	// 21st waits until the first is a minute old.
	for range 17 {
		if _, err := send(b, forum, 0, "general"); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	_, err = send(b, forum, thread, "over the group budget")
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 40 {
		t.Fatalf("21st message in a minute (at 20s): %v, want retry_after 40", err)
	}
	calls := srv.Calls()
	last := calls[len(calls)-1]
	if last.Method != "sendMessage" || last.Code != 429 || last.Chat != forum || last.Thread != thread {
		t.Errorf("last call = %+v", last)
	}
}

func TestGroupLimitRetryAfter(t *testing.T) {
	clk := newClock()
	srv := telegramtest.NewServer(t, telegramtest.Options{Limits: true, Now: clk.Now})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	var threads []int
	for range 20 { // a topic a second: within the chat's limit
		threads = append(threads, createTopic(t, b, forum, "t"))
		clk.Advance(time.Second)
	}
	clk.Advance(10 * time.Second)
	_, err := send(b, forum, threads[0], "x")
	var tooMany *bot.TooManyRequestsError
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 30 {
		t.Fatalf("send 30s after the first of 20 topic calls: %v, want retry_after 30", err)
	}
	clk.Advance(30 * time.Second)
	if _, err := send(b, forum, threads[0], "x"); err != nil {
		t.Fatal(err)
	}
}

// TestChatLimitCountsTheWholeChat: the chat's one message a second counts a
// supergroup and all its topics together, as Telegram documents it, unless
// the PerTopic experiment is asked for.
func TestChatLimitCountsTheWholeChat(t *testing.T) {
	for _, perTopic := range []bool{false, true} {
		t.Run(fmt.Sprintf("PerTopic=%v", perTopic), func(t *testing.T) {
			clk := newClock()
			srv := telegramtest.NewServer(t, telegramtest.Options{Limits: true, Now: clk.Now, Rates: telegramtest.Rates{PerTopic: perTopic}})
			forum := srv.NewForum("team")
			b := newBot(t, srv)
			if _, err := send(b, forum, 0, "a"); err != nil {
				t.Fatal(err)
			}
			srv.NewTopic(forum, "people's")
			topics := srv.Topics(forum)
			_, err := send(b, forum, topics[0].ID, "b")
			if limited := bot.IsTooManyRequestsError(err); limited == perTopic {
				t.Fatalf("second message to the chat in the same second, in another topic: %v, want 429: %v", err, !perTopic)
			}
		})
	}
}

func TestHTMLValidation(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	b := newBot(t, srv)
	for _, text := range []string{
		"<b>bold</b> <i>it</i> <u>u</u> <s>s</s> <tg-spoiler>sp</tg-spoiler> <span class=\"tg-spoiler\">sp</span>",
		`<a href="https://example.com">link</a> <code>x</code> <pre><code class="language-go">go</code></pre>`,
		"<blockquote expandable>long</blockquote> <blockquote>q</blockquote> 1 &lt; 2 &amp;&amp; 3 &gt; 2",
		`<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji> <strong>s</strong> <em>e</em> <ins>i</ins> <strike>s</strike> <del>d</del>`,
	} {
		if _, err := send(b, chat, 0, text); err != nil {
			t.Errorf("send %q: %v", text, err)
		}
	}
	for _, text := range []string{"<p>para</p>", "<b>unclosed", "1 < 2", "<b><i>x</b></i>", "x</b>", `<span>x</span>`, "<br/>"} {
		_, err := send(b, chat, 0, text)
		wantBadRequest(t, err, "can't parse entities")
	}
	_, err := send(b, chat, 0, "<div>x</div>")
	wantBadRequest(t, err, `Bad Request: can't parse entities: Unsupported start tag "div" at byte offset 0`)

	msgs := srv.Messages(chat, 0)
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4", len(msgs))
	}
	if msgs[2].Text != "long q 1 < 2 && 3 > 2" || !strings.HasPrefix(msgs[2].HTML, "<blockquote expandable>") {
		t.Errorf("message = %q, html %q", msgs[2].Text, msgs[2].HTML)
	}
}

func TestVisibleLength(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	b := newBot(t, srv)
	ok := []string{
		"<b>" + strings.Repeat("a", 4096) + "</b>",  // tags do not count
		strings.Repeat("&lt;", 4096),                // an entity is one character
		strings.Repeat("😀", 2048),                   // astral characters are two UTF-16 units
		strings.Repeat("é", 4096),                   // two bytes, one unit
		"\n\n" + strings.Repeat("a", 4096) + "  \n", // trimmed before counting
	}
	for _, text := range ok {
		if _, err := send(b, chat, 0, text); err != nil {
			t.Errorf("send %d bytes: %v", len(text), err)
		}
	}
	tooLong := []string{
		strings.Repeat("a", 4097),
		strings.Repeat("&lt;", 4097),
		strings.Repeat("😀", 2048) + "a",
		"<i>" + strings.Repeat("a", 4097) + "</i>",
	}
	for _, text := range tooLong {
		_, err := send(b, chat, 0, text)
		wantBadRequest(t, err, "Bad Request: message is too long")
	}
	for _, text := range []string{"", "   \n", "<b> </b>"} {
		_, err := send(b, chat, 0, text)
		wantBadRequest(t, err, "Bad Request: message text is empty")
	}
	if got := srv.Messages(chat, 0)[1].Text; got != strings.Repeat("<", 4096) {
		t.Errorf("visible text of &lt;… = %.20q", got)
	}
	// Edits that are too long get Telegram's other wording.
	m := srv.Messages(chat, 0)[0]
	_, err := b.EditMessageText(context.Background(), &bot.EditMessageTextParams{ChatID: chat, MessageID: m.ID, Text: strings.Repeat("b", 4097)})
	wantBadRequest(t, err, "Bad Request: MESSAGE_TOO_LONG")
}

func TestEdits(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	ctx := context.Background()
	thread := createTopic(t, b, forum, "work")
	kb := &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "Yes", CallbackData: "ans:yes"}}}}
	sent, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: forum, MessageThreadID: thread, Text: "<b>hi</b>", ParseMode: models.ParseModeHTML, ReplyMarkup: kb, DisableNotification: true})
	if err != nil {
		t.Fatal(err)
	}
	if sent.MessageThreadID != thread || !sent.IsTopicMessage || sent.Text != "hi" || len(sent.Entities) != 1 || sent.ReplyMarkup == nil {
		t.Errorf("sent message = %+v", sent)
	}

	// The same text and keyboard, written differently: not modified.
	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: sent.ID, Text: "<strong>hi</strong>", ParseMode: models.ParseModeHTML, ReplyMarkup: kb})
	wantBadRequest(t, err, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")

	// Without reply_markup the keyboard goes.
	edited, err := b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: sent.ID, Text: "<b>hi</b>", ParseMode: models.ParseModeHTML})
	if err != nil {
		t.Fatal(err)
	}
	if edited.ReplyMarkup != nil || edited.EditDate == 0 {
		t.Errorf("edited = %+v", edited)
	}
	m, _ := srv.Message(forum, sent.ID)
	if m.Edits != 1 || m.Buttons != nil || !m.Silent || !m.FromBot || m.HTML != "<b>hi</b>" {
		t.Errorf("message = %+v", m)
	}

	if _, err := b.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: forum, MessageID: sent.ID, ReplyMarkup: kb}); err != nil {
		t.Fatal(err)
	}
	_, err = b.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: forum, MessageID: sent.ID, ReplyMarkup: kb})
	wantBadRequest(t, err, "message is not modified")

	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: 9999, Text: "x"})
	wantBadRequest(t, err, "Bad Request: message to edit not found")
	srv.DeleteMessage(forum, sent.ID)
	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: sent.ID, Text: "x"})
	wantBadRequest(t, err, "Bad Request: message to edit not found")

	person := srv.SendText(forum, thread, alice, "mine")
	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: person, Text: "x"})
	wantBadRequest(t, err, "Bad Request: message can't be edited")
}

func TestTopics(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	group := srv.NewGroupWithoutTopics("plain")
	b := newBot(t, srv)
	ctx := context.Background()

	_, err := b.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: group, Name: "x"})
	wantBadRequest(t, err, "Bad Request: the chat is not a forum")
	chat, err := b.GetChat(ctx, &bot.GetChatParams{ChatID: forum})
	if err != nil || !chat.IsForum || chat.Type != models.ChatTypeSupergroup {
		t.Fatalf("getChat = %+v, %v", chat, err)
	}
	me, err := b.GetChatMember(ctx, &bot.GetChatMemberParams{ChatID: forum, UserID: srv.Bot().ID})
	if err != nil || me.Administrator == nil || !me.Administrator.CanManageTopics || !me.Administrator.CanDeleteMessages {
		t.Fatalf("getChatMember = %+v, %v", me, err)
	}

	_, err = b.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: forum, Name: "⏳ " + strings.Repeat("n", 127)})
	wantBadRequest(t, err, "Bad Request: TOPIC_TITLE_TOO_LONG")
	thread := createTopic(t, b, forum, "⏳ "+strings.Repeat("n", 126))
	if got := srv.Topics(forum)[0]; got.ID != thread || got.Name != "⏳ "+strings.Repeat("n", 126) || !got.ByBot {
		t.Errorf("topic = %+v", got)
	}
	if _, err := b.EditForumTopic(ctx, &bot.EditForumTopicParams{ChatID: forum, MessageThreadID: thread, Name: "✅ done"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.EditForumTopic(ctx, &bot.EditForumTopicParams{ChatID: forum, MessageThreadID: thread, Name: "✅ done"})
	wantBadRequest(t, err, "Bad Request: TOPIC_NOT_MODIFIED")

	// Closed by a person: TOPIC_CLOSED until reopened.
	srv.CloseTopic(forum, thread)
	_, err = send(b, forum, thread, "x")
	wantBadRequest(t, err, "Bad Request: TOPIC_CLOSED")
	if _, err := b.ReopenForumTopic(ctx, &bot.ReopenForumTopicParams{ChatID: forum, MessageThreadID: thread}); err != nil {
		t.Fatal(err)
	}
	m, err := send(b, forum, thread, "x")
	if err != nil {
		t.Fatal(err)
	}

	// Deleted by a person: the thread and its messages are gone.
	srv.DeleteTopic(forum, thread)
	_, err = send(b, forum, thread, "x")
	wantBadRequest(t, err, "Bad Request: message thread not found")
	_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: m.ID, Text: "y"})
	wantBadRequest(t, err, "Bad Request: message to edit not found")
	_, err = b.DeleteForumTopic(ctx, &bot.DeleteForumTopicParams{ChatID: forum, MessageThreadID: thread})
	wantBadRequest(t, err, "Bad Request: TOPIC_ID_INVALID")
	if got := srv.Topics(forum)[0]; !got.Deleted {
		t.Errorf("topic = %+v", got)
	}
	// The General topic takes no thread id.
	_, err = send(b, forum, 1, "x")
	wantBadRequest(t, err, "message thread not found")

	srv.SetBotRights(forum, telegramtest.Rights{Admin: true})
	_, err = b.CreateForumTopic(ctx, &bot.CreateForumTopicParams{ChatID: forum, Name: "x"})
	wantBadRequest(t, err, "Bad Request: not enough rights to create a topic")
}

func TestDeleteMessages(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	group := srv.NewGroupWithoutTopics("plain")
	b := newBot(t, srv)
	ctx := context.Background()
	own, err := send(b, group, 0, "mine")
	if err != nil {
		t.Fatal(err)
	}
	theirs := srv.SendText(group, 0, alice, "hello")

	srv.SetBotRights(group, telegramtest.Rights{Admin: true})
	_, err = b.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: group, MessageID: theirs})
	wantBadRequest(t, err, "Bad Request: message can't be deleted")
	if _, err := b.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: group, MessageID: own.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = b.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: group, MessageID: own.ID})
	wantBadRequest(t, err, "Bad Request: message to delete not found")

	srv.SetBotRights(group, telegramtest.Rights{Admin: true, DeleteMessages: true})
	if _, err := b.DeleteMessages(ctx, &bot.DeleteMessagesParams{ChatID: group, MessageIDs: []int{theirs, 12345}}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(group, 0); len(got) != 0 {
		t.Errorf("messages left: %+v", got)
	}
}

func TestFiles(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	b := newBot(t, srv)
	ctx := context.Background()
	ogg := []byte("OggS fake voice")
	srv.SendVoice(chat, 0, alice, ogg, 3)
	srv.SendFile(chat, 0, alice, telegramtest.File{Name: "big.bin", MIME: "application/octet-stream", Content: []byte("x"), Size: 21 << 20})
	srv.SendPhoto(chat, 0, alice, []byte("not really a jpeg"), "look")
	_, ups, _ := getUpdates(t, srv, `{}`)
	if len(ups) != 3 || ups[0].Message.Voice == nil || ups[1].Message.Document == nil || len(ups[2].Message.Photo) != 2 {
		t.Fatalf("updates = %+v", ups)
	}
	voice := ups[0].Message.Voice
	if voice.Duration != 3 || voice.FileSize != int64(len(ogg)) || voice.MimeType != "audio/ogg" {
		t.Errorf("voice = %+v", voice)
	}
	f, err := b.GetFile(ctx, &bot.GetFileParams{FileID: voice.FileID})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(b.FileDownloadLink(f))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(data, ogg) {
		t.Errorf("download = %d %q", resp.StatusCode, data)
	}
	_, err = b.GetFile(ctx, &bot.GetFileParams{FileID: ups[1].Message.Document.FileID})
	wantBadRequest(t, err, "Bad Request: file is too big")
	_, err = b.GetFile(ctx, &bot.GetFileParams{FileID: "nope"})
	wantBadRequest(t, err, "Bad Request: invalid file_id")
	if ups[2].Message.Caption != "look" {
		t.Errorf("caption = %q", ups[2].Message.Caption)
	}

	// The bot uploads a document.
	sent, err := b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: &models.InputFileUpload{Filename: "report.md", Data: strings.NewReader("# Report")}, Caption: "<b>done</b>", ParseMode: models.ParseModeHTML})
	if err != nil {
		t.Fatal(err)
	}
	docs := srv.Documents()
	if len(docs) != 1 || docs[0].Name != "report.md" || string(docs[0].Content) != "# Report" || docs[0].Caption != "done" || docs[0].MessageID != sent.ID {
		t.Errorf("documents = %+v", docs)
	}
	if sent.Document == nil || sent.Document.FileName != "report.md" || sent.Caption != "done" {
		t.Errorf("sent = %+v", sent)
	}
}

func TestCallbacks(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	ctx := context.Background()
	_, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: forum, Text: "pick", ReplyMarkup: &models.InlineKeyboardMarkup{
		InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "x", CallbackData: strings.Repeat("d", 65)}}}}})
	wantBadRequest(t, err, "Bad Request: BUTTON_DATA_INVALID")
	m, err := b.SendMessage(ctx, &bot.SendMessageParams{ChatID: forum, Text: "pick", ReplyMarkup: &models.InlineKeyboardMarkup{
		InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "A", CallbackData: "a"}, {Text: "B", CallbackData: strings.Repeat("b", 64)}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.Messages(forum, 0)[0].Buttons; len(got) != 1 || len(got[0]) != 2 {
		t.Errorf("buttons = %+v", got)
	}
	id := srv.Click(forum, m.ID, alice, "a")
	_, ups, _ := getUpdates(t, srv, `{}`)
	q := ups[len(ups)-1].CallbackQuery
	if q == nil || q.ID != id || q.Data != "a" || q.Message.Message == nil || q.Message.Message.ID != m.ID || q.Message.Message.Chat.IsForum {
		t.Fatalf("callback = %+v", q)
	}
	if _, err := b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id, Text: "ok"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: id})
	wantBadRequest(t, err, "Bad Request: query is too old and response timeout expired or query ID is invalid")
	answers := srv.CallbackAnswers(id)
	if len(answers) != 2 || answers[0].Text != "ok" || answers[0].Err != "" || answers[1].Err == "" {
		t.Errorf("answers = %+v", answers)
	}
	_, err = b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: "404"})
	wantBadRequest(t, err, "query is too old")
}

func TestRichMessages(t *testing.T) {
	ctx := context.Background()
	md := "# Plan\n\n| step | state |\n|---|---|\n| build | **done** |\n\n```go\nfmt.Println(1)\n```\n" + strings.Repeat("word ", 2000)

	t.Run("unsupported", func(t *testing.T) {
		srv := telegramtest.NewServer(t, telegramtest.Options{})
		chat := srv.NewPrivateChat(alice)
		b := newBot(t, srv)
		_, err := b.SendRichMessage(ctx, &bot.SendRichMessageParams{ChatID: chat, RichMessage: models.InputRichMessage{Markdown: md}})
		if !errors.Is(err, bot.ErrorNotFound) || !strings.Contains(err.Error(), "Not Found") {
			t.Fatalf("sendRichMessage = %v, want 404", err)
		}
		m, err := send(b, chat, 0, "plain")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: chat, MessageID: m.ID, RichMessage: &models.InputRichMessage{Markdown: md}})
		wantBadRequest(t, err, "Bad Request: message text is empty")
		_, err = b.SendRichMessageDraft(ctx, &bot.SendRichMessageDraftParams{ChatID: chat, DraftID: 1, RichMessage: models.InputRichMessage{Markdown: "x"}})
		if !errors.Is(err, bot.ErrorNotFound) {
			t.Fatalf("sendRichMessageDraft = %v, want 404", err)
		}
	})

	t.Run("supported", func(t *testing.T) {
		srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: true})
		forum := srv.NewForum("team")
		b := newBot(t, srv)
		thread := createTopic(t, b, forum, "work")
		m, err := b.SendRichMessage(ctx, &bot.SendRichMessageParams{ChatID: forum, MessageThreadID: thread, RichMessage: models.InputRichMessage{Markdown: md}})
		if err != nil {
			t.Fatal(err)
		}
		if m.RichMessage == nil || m.Text != "" || m.MessageThreadID != thread {
			t.Errorf("rich message = %+v", m)
		}
		got := srv.Messages(forum, thread)[0]
		if !got.Rich || got.Markdown != md || !strings.HasPrefix(got.Text, "Plan\n\nstep state\nbuild done") {
			t.Errorf("message = %.80q (rich %v)", got.Text, got.Rich)
		}
		_, err = b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: m.ID, RichMessage: &models.InputRichMessage{Markdown: md}})
		wantBadRequest(t, err, "message is not modified")
		if _, err := b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: forum, MessageID: m.ID, RichMessage: &models.InputRichMessage{Markdown: md + "!"}}); err != nil {
			t.Fatal(err)
		}
		_, err = b.SendRichMessage(ctx, &bot.SendRichMessageParams{ChatID: forum, RichMessage: models.InputRichMessage{Markdown: strings.Repeat("a", 32769)}})
		wantBadRequest(t, err, "message is too long")
		_, err = b.SendRichMessage(ctx, &bot.SendRichMessageParams{ChatID: forum, RichMessage: models.InputRichMessage{HTML: "<p><b>x</p>"}})
		wantBadRequest(t, err, "can't parse entities")
	})
}

func TestDrafts(t *testing.T) {
	clk := newClock()
	srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: true, Now: clk.Now})
	chat := srv.NewPrivateChat(alice)
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	ctx := context.Background()
	_, err := b.SendMessageDraft(ctx, &bot.SendMessageDraftParams{ChatID: forum, DraftID: "7", Text: "x"})
	wantBadRequest(t, err, "Bad Request: TEXTDRAFT_PEER_INVALID")
	for _, text := range []string{"", "thinking about", "thinking about it"} {
		if _, err := b.SendMessageDraft(ctx, &bot.SendMessageDraftParams{ChatID: chat, DraftID: "7", Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.SendRichMessageDraft(ctx, &bot.SendRichMessageDraftParams{ChatID: chat, DraftID: 8, RichMessage: models.InputRichMessage{Markdown: "**x**"}}); err != nil {
		t.Fatal(err)
	}
	ds := srv.Drafts(chat)
	if len(ds) != 2 || ds[0].Updates != 3 || ds[0].Text != "thinking about it" || !ds[0].Active || !ds[1].Rich {
		t.Fatalf("drafts = %+v", ds)
	}
	clk.Advance(31 * time.Second)
	if srv.Drafts(chat)[0].Active {
		t.Error("draft still shows after 30s")
	}
	if _, err := send(b, chat, 0, "final"); err != nil {
		t.Fatal(err)
	}
	if srv.Drafts(chat)[1].Active {
		t.Error("draft still shows after the message was sent")
	}
}

func TestCommandsAndActions(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	ctx := context.Background()
	cmds := []models.BotCommand{{Command: "new", Description: "Start a session"}, {Command: "cancel", Description: "Cancel the turn"}}
	if _, err := b.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: cmds, Scope: &models.BotCommandScopeChat{ChatID: forum}}); err != nil {
		t.Fatal(err)
	}
	got := srv.Commands()[telegramtest.CommandScope{Type: "chat", Chat: forum}]
	if len(got) != 2 || got[0].Command != "new" {
		t.Errorf("commands = %+v", srv.Commands())
	}
	back, err := b.GetMyCommands(ctx, &bot.GetMyCommandsParams{Scope: &models.BotCommandScopeChat{ChatID: forum}})
	if err != nil || len(back) != 2 {
		t.Errorf("getMyCommands = %+v, %v", back, err)
	}
	_, err = b.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: []models.BotCommand{{Command: "Bad-One", Description: "x"}}})
	wantBadRequest(t, err, "BOT_COMMAND_INVALID")
	if _, err := b.SendChatAction(ctx, &bot.SendChatActionParams{ChatID: forum, Action: models.ChatActionTyping}); err != nil {
		t.Fatal(err)
	}
}

func TestAuthAndUnknownMethods(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	bad, err := bot.New("1:wrong", bot.WithServerURL(srv.URL), bot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.GetMe(context.Background())
	if !errors.Is(err, bot.ErrorUnauthorized) {
		t.Fatalf("wrong token: %v", err)
	}
	b := newBot(t, srv)
	me, err := b.GetMe(context.Background())
	if err != nil || me.ID != 123456789 || !me.IsBot {
		t.Fatalf("getMe = %+v, %v", me, err)
	}
	_, err = b.SetChatTitle(context.Background(), &bot.SetChatTitleParams{ChatID: 1, Title: "x"})
	if !errors.Is(err, bot.ErrorNotFound) {
		t.Fatalf("unknown method: %v", err)
	}
	_, err = send(b, 42, 0, "x")
	wantBadRequest(t, err, "Bad Request: chat not found")

	srv.FailNext("sendMessage", telegramtest.Error{Code: 429, Description: "Too Many Requests: retry after 7", RetryAfter: 7})
	chat := srv.NewPrivateChat(alice)
	_, err = send(b, chat, 0, "x")
	var tooMany *bot.TooManyRequestsError
	if !errors.As(err, &tooMany) || tooMany.RetryAfter != 7 {
		t.Fatalf("injected failure: %v", err)
	}
	srv.BlockBot(chat)
	_, err = send(b, chat, 0, "x")
	if !errors.Is(err, bot.ErrorForbidden) || !strings.Contains(err.Error(), "bot was blocked by the user") {
		t.Fatalf("blocked: %v", err)
	}
}

func TestJSONRequests(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	body := `{"chat_id":` + itoa(chat) + `,"text":"<i>hi</i>","parse_mode":"HTML","disable_notification":true,` +
		`"reply_markup":{"inline_keyboard":[[{"text":"Go","callback_data":"go"}]]}}`
	resp, err := http.Post(srv.URL+"/bot"+srv.Token+"/SENDMESSAGE", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	m := srv.Messages(chat, 0)[0]
	if m.Text != "hi" || !m.Silent || len(m.Buttons) != 1 || m.Buttons[0][0].CallbackData != "go" {
		t.Errorf("message = %+v", m)
	}
	resp, err = http.Get(srv.URL + "/bot" + srv.Token + "/getMe")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(data), `{"ok":true,"result":{"id":123456789,"is_bot":true`) {
		t.Errorf("getMe = %s", data)
	}
	resp, err = http.Get(srv.URL + "/botnope/getMe")
	if err != nil {
		t.Fatal(err)
	}
	data, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || string(data) != `{"ok":false,"error_code":401,"description":"Unauthorized"}` {
		t.Errorf("wrong token = %d %s", resp.StatusCode, data)
	}
}
