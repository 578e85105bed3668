package telegramtest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
)

// post sends one form-encoded Bot API call with a plain HTTP client, to see
// the raw answer (or the lack of one).
func post(ctx context.Context, srv *telegramtest.Server, method, form string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/bot"+srv.Token+"/"+method, strings.NewReader(form))
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}

func lastCall(tb testing.TB, srv *telegramtest.Server) telegramtest.Call {
	tb.Helper()
	calls := srv.Calls()
	if len(calls) == 0 {
		tb.Fatal("no call recorded")
	}
	return calls[len(calls)-1]
}

// TestFaultKinds checks each fault's answer as a client sees it and that
// only a lost answer leaves a message behind.
func TestFaultKinds(t *testing.T) {
	tests := []struct {
		fault    telegramtest.Fault
		timeout  time.Duration // the client's patience, for a hang
		check    func(t *testing.T, resp *http.Response, body []byte, err error)
		wantCode int // recorded error_code
		wantMsgs int // messages the chat shows afterwards
	}{
		{fault: telegramtest.FaultTooMany, wantCode: 429, check: func(t *testing.T, resp *http.Response, body []byte, err error) {
			if err != nil || resp.StatusCode != 429 ||
				!strings.HasPrefix(string(body), `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after `) ||
				!strings.Contains(string(body), `"parameters":{"retry_after":`) {
				t.Errorf("answer %v %s, %v", resp, body, err)
			}
		}},
		{fault: telegramtest.FaultInternal, wantCode: 500, check: func(t *testing.T, resp *http.Response, body []byte, err error) {
			if err != nil || resp.StatusCode != 500 || string(body) != `{"ok":false,"error_code":500,"description":"Internal Server Error"}` {
				t.Errorf("answer %v %s, %v", resp, body, err)
			}
		}},
		{fault: telegramtest.FaultBadGateway, wantCode: 502, check: func(t *testing.T, resp *http.Response, body []byte, err error) {
			if err != nil || resp.StatusCode != 502 || resp.Header.Get("Content-Type") != "text/html" ||
				!strings.Contains(string(body), "<title>502 Bad Gateway</title>") {
				t.Errorf("answer %v %s, %v", resp, body, err)
			}
		}},
		{fault: telegramtest.FaultReset, check: wantReset},
		{fault: telegramtest.FaultHang, timeout: 200 * time.Millisecond, check: func(t *testing.T, _ *http.Response, _ []byte, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("error %v, want the client's deadline", err)
			}
		}},
		{fault: telegramtest.FaultLostAnswer, check: wantReset, wantMsgs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.fault.String(), func(t *testing.T) {
			srv := telegramtest.NewServer(t, telegramtest.Options{})
			chat := srv.NewPrivateChat(alice)
			srv.InjectFaults(telegramtest.Faults{Every: 1, Seed: 7, Kinds: []telegramtest.Fault{tt.fault}})
			ctx := context.Background()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			resp, body, err := post(ctx, srv, "sendMessage", "chat_id="+itoa(chat)+"&text=hello")
			tt.check(t, resp, body, err)
			if n := len(srv.Messages(chat, 0)); n != tt.wantMsgs {
				t.Errorf("the chat shows %d messages, want %d", n, tt.wantMsgs)
			}
			c := lastCall(t, srv)
			if c.Fault != tt.fault || c.Chat != chat || c.Method != "sendMessage" || c.Code != tt.wantCode {
				t.Errorf("recorded %+v", c)
			}
			if tt.fault == telegramtest.FaultTooMany && (c.RetryAfter < 1 || c.RetryAfter > 2) {
				t.Errorf("retry_after %d, want 1 or 2 by default", c.RetryAfter)
			}
			// The client gave up on a hang: the server lets go of it.
			srv.Await(t, 5*time.Second, "no request held", func() bool { return srv.Hanging() == 0 })
		})
	}
}

func wantReset(t *testing.T, _ *http.Response, _ []byte, err error) {
	t.Helper()
	if !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, io.EOF) {
		t.Errorf("error %v, want a connection reset", err)
	}
}

// TestFaultsThroughTheBotLibrary checks that go-telegram/bot sees the
// errors a client must handle: TooManyRequestsError with the retry_after,
// and retryable (not 4xx) errors for the rest.
func TestFaultsThroughTheBotLibrary(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	for _, f := range []telegramtest.Fault{telegramtest.FaultTooMany, telegramtest.FaultInternal, telegramtest.FaultBadGateway, telegramtest.FaultReset} {
		srv.InjectFaults(telegramtest.Faults{Every: 1, Kinds: []telegramtest.Fault{f}, MaxRetryAfter: 1})
		_, err := send(b, forum, 0, "hi")
		var tooMany *bot.TooManyRequestsError
		switch {
		case err == nil:
			t.Errorf("%v: no error", f)
		case f == telegramtest.FaultTooMany && (!errors.As(err, &tooMany) || tooMany.RetryAfter != 1):
			t.Errorf("%v: %v, want TooManyRequestsError with retry_after 1", f, err)
		case errors.Is(err, bot.ErrorBadRequest) || errors.Is(err, bot.ErrorForbidden) || errors.Is(err, bot.ErrorNotFound):
			t.Errorf("%v: %v looks permanent", f, err)
		}
	}
	srv.InjectFaults(telegramtest.Faults{})
	if _, err := send(b, forum, 0, "hi"); err != nil {
		t.Fatalf("after faults stopped: %v", err)
	}
	if n := len(srv.Messages(forum, 0)); n != 1 {
		t.Errorf("%d messages, want only the one sent without a fault", n)
	}
}

// TestFaultsAreDeterministic checks that a seed gives the same faults for
// the same calls, and that Every is the rate.
func TestFaultsAreDeterministic(t *testing.T) {
	run := func(seed uint64) []telegramtest.Fault {
		srv := telegramtest.NewServer(t, telegramtest.Options{})
		chat := srv.NewPrivateChat(alice)
		srv.InjectFaults(telegramtest.Faults{Every: 5, Seed: seed, Kinds: []telegramtest.Fault{telegramtest.FaultTooMany, telegramtest.FaultInternal, telegramtest.FaultBadGateway}})
		b := newBot(t, srv)
		var got []telegramtest.Fault
		for range 200 {
			_, _ = b.SendChatAction(context.Background(), &bot.SendChatActionParams{ChatID: chat, Action: models.ChatActionTyping})
			got = append(got, lastCall(t, srv).Fault)
		}
		return got
	}
	a, b, c := run(1), run(1), run(2)
	faulted := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d: %v then %v with the same seed", i, a[i], b[i])
		}
		if a[i] != 0 {
			faulted++
		}
	}
	if faulted < 20 || faulted > 60 {
		t.Errorf("%d of 200 calls faulted, want about 40", faulted)
	}
	if strings.Join(names(a), ",") == strings.Join(names(c), ",") {
		t.Error("another seed gave the same faults")
	}
}

func names(fs []telegramtest.Fault) []string {
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.String()
	}
	return out
}

// TestFaultsSpareExemptMethods checks that long polling and start-up calls
// are not faulted by default, and are when Exempt is empty.
func TestFaultsSpareExemptMethods(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	b := newBot(t, srv)
	srv.InjectFaults(telegramtest.Faults{Every: 1, Kinds: []telegramtest.Fault{telegramtest.FaultInternal}})
	if _, err := b.GetMe(context.Background()); err != nil {
		t.Errorf("getMe: %v", err)
	}
	if code, _, desc := getUpdates(t, srv, `{"timeout":0}`); code != 200 {
		t.Errorf("getUpdates: %d %s", code, desc)
	}
	srv.InjectFaults(telegramtest.Faults{Every: 1, Kinds: []telegramtest.Fault{telegramtest.FaultInternal}, Exempt: []string{}})
	if _, err := b.GetMe(context.Background()); err == nil {
		t.Error("getMe not faulted with nothing exempt")
	}
	if code, _, _ := getUpdates(t, srv, `{"timeout":0}`); code != 500 {
		t.Errorf("getUpdates answered %d with nothing exempt, want 500", code)
	}
}

// TestOutage checks that an outage fails every call but long polling, with
// 502s and resets, until it ends.
func TestOutage(t *testing.T) {
	srv := telegramtest.NewServer(t, telegramtest.Options{})
	forum := srv.NewForum("team")
	b := newBot(t, srv)
	srv.SetOutage(true)
	seen := map[telegramtest.Fault]int{}
	for range 20 {
		if _, err := send(b, forum, 0, "hi"); err == nil {
			t.Fatal("a send went through during the outage")
		}
		seen[lastCall(t, srv).Fault]++
	}
	if seen[telegramtest.FaultBadGateway] == 0 || seen[telegramtest.FaultReset] == 0 || len(seen) != 2 {
		t.Errorf("outage faults %v, want 502s and resets only", seen)
	}
	if code, _, desc := getUpdates(t, srv, `{"timeout":0}`); code != 200 {
		t.Errorf("getUpdates during the outage: %d %s", code, desc)
	}
	srv.SetOutage(false)
	if _, err := send(b, forum, 0, "hi"); err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	if n := len(srv.Messages(forum, 0)); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
}

// TestHangEndsWhenTheServerCloses checks that a held request does not keep
// the server's Close waiting, and that its client gets an error.
func TestHangEndsWhenTheServerCloses(t *testing.T) {
	result := make(chan error, 1)
	t.Run("server", func(t *testing.T) {
		srv := telegramtest.NewServer(t, telegramtest.Options{})
		chat := srv.NewPrivateChat(alice)
		srv.InjectFaults(telegramtest.Faults{Every: 1, Kinds: []telegramtest.Fault{telegramtest.FaultHang}})
		go func() {
			_, _, err := post(context.Background(), srv, "sendMessage", "chat_id="+itoa(chat)+"&text=hello")
			result <- err
		}()
		srv.Await(t, 5*time.Second, "the request held", func() bool { return srv.Hanging() == 1 })
	}) // the server closes here
	select {
	case err := <-result:
		if err == nil {
			t.Error("the held request was answered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the held request outlived the server")
	}
}

// TestEarlyCalls checks the record of 429s and the calls that did not
// honor them, per chat.
func TestEarlyCalls(t *testing.T) {
	clk := newClock()
	srv := telegramtest.NewServer(t, telegramtest.Options{Now: clk.Now})
	forum, other := srv.NewForum("team"), srv.NewForum("other")
	b := newBot(t, srv)
	thread := createTopic(t, b, forum, "one")
	srv.FailNext("sendMessage", telegramtest.Error{Code: 429, Description: "Too Many Requests: retry after 2", RetryAfter: 2})
	if _, err := send(b, forum, thread, "refused"); err == nil {
		t.Fatal("FailNext did not fail")
	}
	clk.Advance(500 * time.Millisecond)
	if _, err := send(b, other, 0, "another chat may go on"); err != nil {
		t.Fatal(err)
	}
	if _, err := send(b, forum, 0, "too early, even in another topic"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	if _, err := send(b, forum, thread, "in time"); err != nil {
		t.Fatal(err)
	}

	tooMany := srv.TooManyAnswers()
	if len(tooMany) != 1 || tooMany[0].Chat != forum || tooMany[0].Thread != thread || tooMany[0].RetryAfter != 2 {
		t.Fatalf("429s %+v", tooMany)
	}
	early := srv.EarlyCalls(0)
	if len(early) != 1 || early[0].Call.Chat != forum || early[0].Call.Thread != 0 {
		t.Fatalf("early calls %v, want the send to the General topic", early)
	}
	if !strings.Contains(early[0].String(), "500ms after a 429 with retry_after 2") {
		t.Errorf("described as %q", early[0])
	}
	if got := srv.EarlyCalls(time.Second); len(got) != 0 {
		t.Errorf("within a grace of 1s: %v", got)
	}
}
