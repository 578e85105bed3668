package telegramtest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

func TestLongPolling(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	thread := createTopic(t, b, forum, "work")

	got := make(chan *models.Update, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b2 := newBot(t, srv, bot.WithDefaultHandler(func(_ context.Context, _ *bot.Bot, u *models.Update) { got <- u }),
		bot.WithHTTPClient(3*time.Second, http.DefaultClient))
	go b2.Start(ctx)

	id := srv.SendText(forum, thread, alice, "/new@parley_test_bot fix the bug")
	var u *models.Update
	select {
	case u = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("no update")
	}
	m := u.Message
	if m == nil || m.ID != id || m.MessageThreadID != thread || !m.IsTopicMessage || !m.Chat.IsForum || m.From.ID != alice.ID {
		t.Fatalf("update = %+v", m)
	}
	if len(m.Entities) != 1 || m.Entities[0].Type != models.MessageEntityTypeBotCommand || m.Entities[0].Length != 20 {
		t.Errorf("entities = %+v", m.Entities)
	}
	if m.ReplyToMessage == nil || m.ReplyToMessage.ForumTopicCreated == nil || m.ReplyToMessage.ID != thread {
		t.Errorf("a topic message replies to the topic's creation: %+v", m.ReplyToMessage)
	}
	// The next poll confirms the update.
	srv.Await(t, 5*time.Second, "offset past the update", func() bool { return srv.Offset() == u.ID+1 })
	if srv.Pending() != 0 {
		t.Errorf("pending = %d", srv.Pending())
	}
}

// getUpdates calls the method directly, as the library's poller is not
// exported.
func getUpdates(tb testing.TB, srv *telegramtest.Server, params string) (int, []models.Update, string) {
	tb.Helper()
	resp, err := http.Post(srv.URL+"/bot"+srv.Token+"/getUpdates", "application/json", strings.NewReader(params))
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		OK          bool            `json:"ok"`
		Result      []models.Update `json:"result"`
		Description string          `json:"description"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode, body.Result, body.Description
}

func TestGetUpdatesOffset(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	for _, text := range []string{"one", "two", "three"} {
		srv.SendText(chat, 0, alice, text)
	}
	_, ups, _ := getUpdates(t, srv, `{}`)
	if len(ups) != 3 {
		t.Fatalf("%d updates, want 3", len(ups))
	}
	first := ups[0].ID
	// Without an offset nothing is confirmed: the same updates again.
	_, again, _ := getUpdates(t, srv, `{"limit":2}`)
	if len(again) != 2 || again[0].ID != first {
		t.Fatalf("again = %+v", again)
	}
	// offset confirms every earlier update.
	_, rest, _ := getUpdates(t, srv, `{"offset":`+itoa(first+2)+`}`)
	if len(rest) != 1 || rest[0].Message.Text != "three" || srv.Offset() != first+2 {
		t.Fatalf("rest = %+v, offset %d", rest, srv.Offset())
	}
	// allowed_updates filters.
	srv.Click(chat, rest[0].Message.ID, alice, "x")
	_, only, _ := getUpdates(t, srv, `{"offset":`+itoa(first+3)+`,"allowed_updates":["message"]}`)
	if len(only) != 0 {
		t.Fatalf("callback delivered despite allowed_updates: %+v", only)
	}
	// A long poll waits for the next update.
	done := make(chan []models.Update)
	go func() {
		_, ups, _ := getUpdates(t, srv, `{"offset":`+itoa(first+3)+`,"timeout":10,"allowed_updates":[]}`)
		done <- ups
	}()
	select {
	case ups := <-done:
		if len(ups) != 1 || ups[0].CallbackQuery == nil {
			t.Fatalf("long poll = %+v", ups)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not return")
	}
	go func() {
		_, ups, _ := getUpdates(t, srv, `{"offset":`+itoa(first+4)+`,"timeout":10}`)
		done <- ups
	}()
	srv.Await(t, 5*time.Second, "the poll to start", func() bool { return srv.Offset() == first+4 })
	srv.SendText(chat, 0, alice, "four")
	select {
	case ups := <-done:
		if len(ups) != 1 || ups[0].Message.Text != "four" {
			t.Fatalf("long poll = %+v", ups)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll did not wake")
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestWebhook(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	type delivery struct {
		secret string
		update models.Update
	}
	got := make(chan delivery, 10)
	var mu sync.Mutex
	fail := 1
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u models.Update
		_ = json.NewDecoder(r.Body).Decode(&u)
		got <- delivery{r.Header.Get("X-Telegram-Bot-Api-Secret-Token"), u}
		mu.Lock()
		defer mu.Unlock()
		if fail > 0 {
			fail--
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer hook.Close()
	b := newBot(t, srv)
	ctx := context.Background()
	if _, err := b.SetWebhook(ctx, &bot.SetWebhookParams{URL: hook.URL + "/tg", SecretToken: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	code, _, desc := getUpdates(t, srv, `{}`)
	if code != 409 || !strings.Contains(desc, "webhook is active") {
		t.Errorf("getUpdates with a webhook: %d %s", code, desc)
	}
	id := srv.SendText(chat, 0, alice, "hello")
	for attempt := range 2 {
		select {
		case d := <-got:
			if d.secret != "s3cret" || d.update.Message == nil || d.update.Message.ID != id {
				t.Fatalf("delivery %d = %+v", attempt, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("delivery %d did not come", attempt)
		}
	}
	srv.Await(t, 5*time.Second, "delivery confirmed", func() bool { return srv.Pending() == 0 })
	info, err := b.GetWebhookInfo(ctx)
	if err != nil || info.URL != hook.URL+"/tg" || info.PendingUpdateCount != 0 {
		t.Errorf("webhook info = %+v, %v", info, err)
	}
	if _, err := b.DeleteWebhook(ctx, &bot.DeleteWebhookParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = b.SetWebhook(ctx, &bot.SetWebhookParams{URL: "https://example.com/hook"})
	wantBadRequest(t, err, "bad webhook")
}

func TestSecondPollerEndsTheFirst(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	type answer struct {
		code int
		desc string
	}
	first := make(chan answer, 1)
	go func() {
		code, _, desc := getUpdates(t, srv, `{"timeout":10}`)
		first <- answer{code, desc}
	}()
	srv.Await(t, 5*time.Second, "the first poll to wait", func() bool { return srv.Polling() == 1 })
	second := make(chan answer, 1)
	go func() {
		code, _, desc := getUpdates(t, srv, `{"timeout":1}`)
		second <- answer{code, desc}
	}()
	defer func() { <-second }()
	select {
	case a := <-first:
		if a.code != 409 || a.desc != "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running" {
			t.Fatalf("first poll = %d %q", a.code, a.desc)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first poll was not ended")
	}
}

// TestSecondLongPollConflicts: as on Telegram when two processes poll one
// bot, a getUpdates arriving while another waits ends the waiting one with
// 409 "terminated by other getUpdates request"; the newer one is answered
// as usual.
func TestSecondLongPollConflicts(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	type answer struct {
		code int
		desc string
	}
	first := make(chan answer, 1)
	go func() {
		code, _, desc := getUpdates(t, srv, `{"timeout": 30}`)
		first <- answer{code, desc}
	}()
	srv.Await(t, 5*time.Second, "the first long poll to wait", func() bool { return srv.Polling() == 1 })
	if code, _, desc := getUpdates(t, srv, `{"timeout": 0}`); code != http.StatusOK {
		t.Fatalf("the second getUpdates: %d %s", code, desc)
	}
	select {
	case a := <-first:
		if a.code != http.StatusConflict || !strings.Contains(a.desc, "Conflict: terminated by other getUpdates request") {
			t.Errorf("the waiting getUpdates ended with %d %q, want 409 terminated by other getUpdates request", a.code, a.desc)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting getUpdates was not ended by the second")
	}
}
