package telegramtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// TestNegativeOffset: as the Bot API documents, a negative offset returns
// the last -offset updates and forgets all earlier ones.
func TestNegativeOffset(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	for _, text := range []string{"one", "two", "three"} {
		srv.SendText(chat, 0, alice, text)
	}
	_, last, _ := getUpdates(t, srv, `{"offset":-1}`)
	if len(last) != 1 || last[0].Message.Text != "three" {
		t.Fatalf("offset -1 = %+v, want the last update", last)
	}
	if _, again, _ := getUpdates(t, srv, `{}`); len(again) != 1 || again[0].ID != last[0].ID {
		t.Errorf("after offset -1: %+v, want the earlier updates forgotten", again)
	}
	if srv.Offset() != last[0].ID {
		t.Errorf("Offset = %d, want %d", srv.Offset(), last[0].ID)
	}
}

// TestWebhookSettings: setWebhook checks its secret_token (1-256 of
// A-Z, a-z, 0-9, _ and -) and the URL's scheme; getWebhookInfo shows the
// pending updates, the default max_connections of 40 and the last
// delivery error; deleteWebhook with drop_pending_updates drops the
// queue.
func TestWebhookSettings(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	chat := srv.NewPrivateChat(alice)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer hook.Close()
	b := newBot(t, srv)
	ctx := context.Background()

	for _, tt := range []struct{ secret, want string }{
		{"has space", "Bad Request: secret token contains unallowed characters"},
		{strings.Repeat("s", 257), "Bad Request: secret token is too long"},
	} {
		_, err := b.SetWebhook(ctx, &bot.SetWebhookParams{URL: hook.URL, SecretToken: tt.secret})
		wantBadRequest(t, err, tt.want)
	}
	_, err := b.SetWebhook(ctx, &bot.SetWebhookParams{URL: "ftp://127.0.0.1/hook"})
	wantBadRequest(t, err, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
	if info, err := b.GetWebhookInfo(ctx); err != nil || info.URL != "" {
		t.Fatalf("webhook info after refused settings = %+v, %v; want none set", info, err)
	}

	if _, err := b.SetWebhook(ctx, &bot.SetWebhookParams{URL: hook.URL, SecretToken: strings.Repeat("A-z_9", 51)}); err != nil {
		t.Fatalf("a 255-character secret of allowed characters: %v", err)
	}
	srv.SendText(chat, 0, alice, "hello")
	srv.Await(t, 5*time.Second, "a failed delivery in getWebhookInfo", func() bool {
		info, err := b.GetWebhookInfo(ctx)
		return err == nil && info.LastErrorMessage != ""
	})
	info, err := b.GetWebhookInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.URL != hook.URL || info.PendingUpdateCount != 1 || info.MaxConnections != 40 || info.LastErrorDate == 0 ||
		info.LastErrorMessage != "Wrong response from the webhook: 502 Bad Gateway" {
		t.Errorf("webhook info = %+v", info)
	}

	if _, err := b.DeleteWebhook(ctx, &bot.DeleteWebhookParams{DropPendingUpdates: true}); err != nil {
		t.Fatal(err)
	}
	if n := srv.Pending(); n != 0 {
		t.Errorf("%d updates pending after drop_pending_updates, want 0", n)
	}
	if info, err := b.GetWebhookInfo(ctx); err != nil || info.URL != "" || info.MaxConnections != 0 || info.LastErrorMessage != "" {
		t.Errorf("webhook info after delete = %+v, %v", info, err)
	}
}
