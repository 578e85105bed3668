package telegram_test

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core/adaptertest"
)

// TestDialOpensTheConnections: with Options.Dial (how the end-to-end
// tests reach an in-memory fake) the default client's connections are
// the dial function's: a Bot API URL no resolver knows works when Dial
// connects it to the fake.
func TestDialOpensTheConnections(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("Team")
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int32
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		if address != "bot-api.invalid:80" {
			t.Errorf("dialed %s, want the Bot API URL's host", address)
		}
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, u.Host)
	}
	cur := &cursors{m: map[string]string{}}
	a, err := telegram.New(telegram.Options{Token: srv.Token, APIURL: "http://bot-api.invalid", ChatID: forum, Dial: dial,
		Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(t.Context()); err != nil {
		t.Fatalf("check through Dial: %v", err)
	}
	if dials.Load() == 0 {
		t.Fatal("Dial was never called")
	}
}
