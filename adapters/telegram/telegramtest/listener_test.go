package telegramtest_test

import (
	"context"
	"net"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// TestServesOnGivenListener: with Options.Listener the fake serves on the
// listener the test hands it (an in-memory one, for tests on a fake
// clock), its URL names that listener's address, and the test's end
// closes it.
func TestServesOnGivenListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var srv *telegramtest.Server
	t.Run("serve", func(t *testing.T) {
		srv = telegramtest.NewServer(t, telegramtest.Options{Listener: ln})
		if want := "http://" + ln.Addr().String(); srv.URL != want {
			t.Fatalf("URL = %q, want %q", srv.URL, want)
		}
		me, err := newBot(t, srv).GetMe(context.Background())
		if err != nil || me.ID != srv.Bot().ID {
			t.Fatalf("getMe = %+v, %v; want the bot %d", me, err, srv.Bot().ID)
		}
	})
	if _, err := ln.Accept(); err == nil {
		t.Fatal("the listener is still open after the test that served on it")
	}
}
