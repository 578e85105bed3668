package slacktest_test

import (
	"net"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
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
	t.Run("serve", func(t *testing.T) {
		srv := slacktest.NewServer(t, slacktest.Options{Listener: ln})
		if want := "http://" + ln.Addr().String() + "/api/"; srv.URL != want {
			t.Fatalf("URL = %q, want %q", srv.URL, want)
		}
		auth, err := slack.New(srv.BotToken, slack.OptionAPIURL(srv.URL)).AuthTest()
		if err != nil || auth.UserID != srv.BotUserID {
			t.Fatalf("auth.test = %+v, %v; want the bot %s", auth, err, srv.BotUserID)
		}
	})
	if _, err := ln.Accept(); err == nil {
		t.Fatal("the listener is still open after the test that served on it")
	}
}
