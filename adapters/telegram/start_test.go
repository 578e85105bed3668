package telegram_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/adapters/telegram"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// The daemon starts the adapter with Check and retries it while parley
// serves on (a refusal slowly, a Bot API that is down with backoff); what
// Check and Run return tells it which.

func newStartAdapter(t *testing.T, token, url string, chat int64) *telegram.Adapter {
	t.Helper()
	cur := &cursors{m: map[string]string{}}
	a, err := telegram.New(telegram.Options{Token: token, APIURL: url, ChatID: chat,
		Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestCheckSaysDownOrRefused(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("Team")
	plain := srv.NewGroupWithoutTopics("Plain")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	tests := []struct {
		name      string
		token     string
		url       string
		chat      int64
		permanent bool
		want      string
	}{
		{"Bot API down", srv.Token, closed, forum, false, "cannot reach the Bot API"},
		{"token refused", "1:wrong", srv.URL, forum, true, "token was refused"},
		{"unknown chat", srv.Token, srv.URL, -999, true, "add the bot to the group"},
		{"group without topics", srv.Token, srv.URL, plain, true, "enable Topics"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := newStartAdapter(t, tt.token, tt.url, tt.chat).Check(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) || core.IsPermanent(err) != tt.permanent {
				t.Fatalf("Check: %v (permanent %v), want %q (permanent %v)", err, core.IsPermanent(err), tt.want, tt.permanent)
			}
			if !tt.permanent && core.FixOf(err) == "" {
				t.Errorf("no fix for %v", err)
			}
			if strings.Contains(err.Error()+core.FixOf(err), srv.Token) {
				t.Errorf("quotes the token: %v", err)
			}
		})
	}
}

// TestRunEndsWhenTheTokenIsRefused: a token refused while polling (revoked
// with @BotFather) ends Run with a refusal, so that the daemon reports
// Telegram down and holds its deliveries, instead of polling in vain.
func TestRunEndsWhenTheTokenIsRefused(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	a := newStartAdapter(t, srv.Token, srv.URL, srv.NewForum("Team"))
	if err := a.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.FailNext("getUpdates", telegramtest.Error{Code: 401, Description: "Unauthorized"})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	err := a.Run(ctx, core.HandlerFunc(func(context.Context, core.Command) (core.Result, error) { return core.Result{}, nil }))
	if ctx.Err() != nil || !core.IsPermanent(err) || !strings.Contains(err.Error(), "token was refused") {
		t.Fatalf("Run: %v (ctx %v)", err, ctx.Err())
	}
}

// botAPIDown answers the start-up calls as the Bot API does and fails
// every getUpdates as an unreachable server does, in memory, so that the
// poll loop's backoff runs on a synctest bubble's clock.
type botAPIDown struct{}

func (botAPIDown) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/getUpdates") {
		return nil, errors.New("dial tcp: connection refused")
	}
	body := `{"ok":true,"result":true}`
	if strings.HasSuffix(r.URL.Path, "/getMe") {
		body = `{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"parley","username":"parley_bot"}}`
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// TestRunEndsWhenTheBotAPIStaysDown: a Bot API that stops answering while
// parley polls ends Run after about a minute of retries (1+2+4+8+16 s
// between six attempts), so that the daemon reports Telegram down and
// starts it again with its own backoff; the error is not a refusal and
// carries its fix.
func TestRunEndsWhenTheBotAPIStaysDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cur := &cursors{m: map[string]string{}}
		a, err := telegram.New(telegram.Options{Token: "1:x", APIURL: "http://bot.invalid", HTTPClient: &http.Client{Transport: botAPIDown{}},
			Cursors: cur, Leases: cur, Authorizer: adaptertest.Everyone, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Check(t.Context()); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = a.Run(t.Context(), core.HandlerFunc(func(context.Context, core.Command) (core.Result, error) { return core.Result{}, nil }))
		if core.IsPermanent(err) || core.FixOf(err) == "" || !strings.Contains(err.Error(), "has not answered for 6 attempts") {
			t.Fatalf("Run: %v (fix %q)", err, core.FixOf(err))
		}
		if d := time.Since(start); d != 31*time.Second {
			t.Errorf("Run gave up after %v, want 31s", d)
		}
	})
}
