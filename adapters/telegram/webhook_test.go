package telegram_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/core/adaptertest"
)

// TestWebhookNotTaken: an update that no Run takes — none runs, as while
// parley stops or before it started — is answered 503 once its request
// ends (the listener shutting down cancels it), never 200: net/http would
// send 200 for a handler that returns without answering, and Telegram
// would drop the update.
func TestWebhookNotTaken(t *testing.T) {
	cur := &cursors{m: map[string]string{}}
	a, err := telegram.New(telegram.Options{Token: "123:abc", APIURL: "http://127.0.0.1:1", ChatID: -100, Webhook: true,
		WebhookURL: "https://x.example.org/tg", WebhookSecret: "s3cret-token", Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/telegram",
		strings.NewReader(`{"update_id": 7, "message": {"message_id": 1, "date": 1, "chat": {"id": -100, "type": "supergroup"}, "text": "hi"}}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s3cret-token")
	cancel()
	w := httptest.NewRecorder()
	a.WebhookHandler().ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("an update no Run took: %d, want 503 so Telegram delivers it again", w.Code)
	}
}
