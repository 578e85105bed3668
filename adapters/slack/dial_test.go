package slack_test

import (
	"context"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
	"github.com/parley-chat/parley/store/files"
)

// TestDialOpensTheConnections: with Options.Dial (how the end-to-end
// tests reach an in-memory fake) both the Web API calls and Socket Mode's
// websocket are the dial function's connections.
func TestDialOpensTheConnections(t *testing.T) {
	srv := slacktest.NewServer(t, slacktest.Options{})
	channel := srv.NewChannel("dial")
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	var dials, upgrades atomic.Int32
	dial := func(ctx context.Context, network, address string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		c, err := d.DialContext(ctx, network, u.Host)
		return &sniffed{Conn: c, upgrades: &upgrades}, err
	}
	a, err := slack.New(slack.Options{BotToken: srv.BotToken, AppToken: srv.AppToken, APIURL: "http://slack.invalid/api/", Channel: channel,
		Dial: dial, Authorizer: adaptertest.Everyone, Files: tempFiles(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Check(t.Context()); err != nil {
		t.Fatalf("check through Dial: %v", err)
	}
	if dials.Load() == 0 {
		t.Fatal("the Web API calls did not go through Dial")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, core.HandlerFunc(func(context.Context, core.Command) (core.Result, error) { return core.Result{}, nil }))
	}()
	srv.Await(t, 10*time.Second, "a Socket Mode connection", func() bool { return srv.Connections() > 0 })
	cancel()
	<-done
	if upgrades.Load() == 0 {
		t.Error("the websocket did not go through Dial")
	}
}

// sniffed counts the connections whose request asks for a websocket.
type sniffed struct {
	net.Conn
	upgrades *atomic.Int32
	seen     bool
}

func (c *sniffed) Write(p []byte) (int, error) {
	if !c.seen {
		c.seen = true
		if strings.Contains(strings.ToLower(string(p)), "upgrade: websocket") {
			c.upgrades.Add(1)
		}
	}
	return c.Conn.Write(p)
}

// tempFiles is a store of files in a temporary directory.
func tempFiles(tb testing.TB) *files.Store {
	tb.Helper()
	fs, err := files.New(tb.TempDir(), files.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return fs
}
