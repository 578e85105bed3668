package slacktest_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/adapters/slack/slacktest"
)

// wantRateLimited checks that err is slack-go's *slack.RateLimitedError
// with retry.
func wantRateLimited(tb testing.TB, err error, retry time.Duration) {
	tb.Helper()
	var rl *slack.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter != retry {
		tb.Fatalf("error = %v (%T), want *slack.RateLimitedError retrying after %v", err, err, retry)
	}
}

func TestLimits(t *testing.T) {
	t.Run("postMessage one a second per channel", func(t *testing.T) {
		srv, api, ch, _ := setup(t, slacktest.Options{Limits: true})
		other := srv.NewChannel("other")
		text := slack.MsgOptionText("x", false)
		post(t, api, ch, text)
		_, _, err := api.PostMessageContext(ctx(t), ch, text)
		wantRateLimited(t, err, time.Second)
		post(t, api, other, text) // another channel has its own window
		if srv.RateLimited() != 1 {
			t.Fatalf("RateLimited = %d, want 1", srv.RateLimited())
		}
		calls := srv.Calls()
		if c := calls[1]; c.Method != "chat.postMessage" || c.Channel != ch || c.Error != "ratelimited" || c.RetryAfter != time.Second {
			t.Fatalf("recorded 429 = %+v", c)
		}
		<-time.After(time.Until(calls[0].Time.Add(time.Second))) // the window passes
		post(t, api, ch, text)
	})
	t.Run("chat.update tier 3", func(t *testing.T) {
		srv, api, ch, _ := setup(t, slacktest.Options{Limits: true})
		ts := post(t, api, ch, slack.MsgOptionText("x", false))
		for i := range 50 {
			if _, _, _, err := api.UpdateMessageContext(ctx(t), ch, ts, slack.MsgOptionText("x", false)); err != nil {
				t.Fatalf("update %d: %v", i+1, err)
			}
		}
		_, _, _, err := api.UpdateMessageContext(ctx(t), ch, ts, slack.MsgOptionText("x", false))
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) || rl.RetryAfter < 55*time.Second || rl.RetryAfter > time.Minute {
			t.Fatalf("51st update: %v, want a 429 for about a minute", err)
		}
		if m, _ := srv.Message(ch, ts); m.Edits != 50 {
			t.Fatalf("edits = %d, want 50: a refused call has no effect", m.Edits)
		}
	})
	t.Run("off by default", func(t *testing.T) {
		_, api, ch, _ := setup(t, slacktest.Options{})
		for range 5 {
			post(t, api, ch, slack.MsgOptionText("x", false))
		}
	})
}

func TestFailNext(t *testing.T) {
	srv, api, ch, _ := setup(t, slacktest.Options{})
	srv.FailNext("chat.postMessage", slacktest.Error{Code: "ratelimited", Status: http.StatusTooManyRequests, RetryAfter: 1500 * time.Millisecond})
	srv.FailNext("chat.postMessage", slacktest.Error{Code: "channel_not_found"})
	srv.FailNext("chat.postMessage", slacktest.Error{Status: http.StatusServiceUnavailable, Code: "service_unavailable"})
	_, _, err := api.PostMessageContext(ctx(t), ch, slack.MsgOptionText("x", false))
	wantRateLimited(t, err, 2*time.Second)
	_, _, err = api.PostMessageContext(ctx(t), ch, slack.MsgOptionText("x", false))
	wantCode(t, err, "channel_not_found")
	_, _, err = api.PostMessageContext(ctx(t), ch, slack.MsgOptionText("x", false))
	var sc slack.StatusCodeError
	if !errors.As(err, &sc) || sc.Code != http.StatusServiceUnavailable {
		t.Fatalf("error = %v, want a 503", err)
	}
	post(t, api, ch, slack.MsgOptionText("x", false))
	if n := len(srv.Messages(ch)); n != 1 {
		t.Fatalf("messages = %d, want 1: failed calls have no effect", n)
	}
	if srv.RateLimited() != 0 {
		t.Fatalf("RateLimited counts FailNext: %d", srv.RateLimited())
	}
}

func TestFaults(t *testing.T) {
	srv, api, ch, _ := setup(t, slacktest.Options{})
	text := slack.MsgOptionText("x", false)

	srv.InjectFaults(slacktest.Faults{Every: 1, Kinds: []slacktest.Fault{slacktest.FaultTooMany}, MaxRetryAfter: time.Second})
	_, _, err := api.PostMessageContext(ctx(t), ch, text)
	wantRateLimited(t, err, time.Second)
	if _, err := api.AuthTestContext(ctx(t)); err != nil {
		t.Fatalf("auth.test is exempt by default: %v", err)
	}

	srv.InjectFaults(slacktest.Faults{Every: 1, Kinds: []slacktest.Fault{slacktest.FaultHang}})
	short, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	if _, _, err := api.PostMessageContext(short, ch, text); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hang: %v", err)
	}
	srv.Await(t, 5*time.Second, "the hung request to end", func() bool { return srv.Hanging() == 0 })

	srv.InjectFaults(slacktest.Faults{})
	srv.SetOutage(true)
	for range 3 {
		if _, _, err := api.PostMessageContext(ctx(t), ch, text); err == nil {
			t.Fatal("a call during an outage succeeded")
		}
	}
	srv.SetOutage(false)

	srv.InjectFaults(slacktest.Faults{Every: 1, Kinds: []slacktest.Fault{slacktest.FaultLostAnswer}})
	if _, _, err := api.PostMessageContext(ctx(t), ch, text); err == nil {
		t.Fatal("a lost answer was answered")
	}
	srv.InjectFaults(slacktest.Faults{})
	if n := len(srv.Messages(ch)); n != 1 {
		t.Fatalf("messages = %d, want only the one whose answer was lost", n)
	}
	faulted := 0
	for _, c := range srv.Calls() {
		if c.Fault != 0 {
			faulted++
		}
	}
	if faulted != 6 {
		t.Fatalf("faulted calls = %d, want 6", faulted)
	}
}
