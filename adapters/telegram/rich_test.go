package telegram_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// TestCheckLearnsRichMessages: the adapter knows whether the server speaks
// rich messages before its first message, so a long first output is cut to
// the right length (one rich message, not HTML's 4096-unit pieces); the
// probe sends nothing anyone sees, and what it learned is remembered.
func TestCheckLearnsRichMessages(t *testing.T) {
	for _, rich := range []bool{true, false} {
		srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: rich})
		forum := srv.NewForum("Team")
		cur := &cursors{m: map[string]string{}}
		a, err := telegram.New(telegram.Options{Token: srv.Token, APIURL: srv.URL, ChatID: forum, Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Check(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := a.Capabilities()
		wantMarkup, wantCursor := telegram.MarkupHTML, "no"
		if rich {
			wantMarkup, wantCursor = core.MarkupMarkdown, "yes"
		}
		if c.Markup != wantMarkup || (rich != (c.MaxLength > 4096)) {
			t.Errorf("rich=%v: after Check, markup %q and max length %d, want %q", rich, c.Markup, c.MaxLength, wantMarkup)
		}
		if got, _ := cur.Cursor(context.Background(), "telegram.rich"); got != wantCursor {
			t.Errorf("rich=%v: remembered %q, want %q", rich, got, wantCursor)
		}
		if msgs := srv.Messages(forum, 0); len(msgs) != 0 {
			t.Errorf("rich=%v: the probe showed %+v", rich, msgs)
		}
	}
}
