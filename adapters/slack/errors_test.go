package slack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

func TestClassify(t *testing.T) {
	code := func(c string) error { return slack.SlackErrorResponse{Err: c} }
	tests := []struct {
		name, method string
		err          error
		is           error // a sentinel errors.Is finds, if any
		permanent    bool
		rateLimit    time.Duration // > 0: a *core.RateLimitError with this RetryAfter
		scope        core.Scope
		says         string // words the error carries
	}{
		{name: "nil", method: "chat.postMessage"},
		{name: "429 with Retry-After, post", method: "chat.postMessage", err: &slack.RateLimitedError{RetryAfter: 3 * time.Second},
			rateLimit: 3 * time.Second, scope: core.ScopeGroup},
		{name: "429 with Retry-After, update", method: "chat.update", err: &slack.RateLimitedError{RetryAfter: 7 * time.Second},
			rateLimit: 7 * time.Second, scope: core.ScopeAccount},
		{name: "429 of delete", method: "chat.delete", err: &slack.RateLimitedError{RetryAfter: time.Second}, rateLimit: time.Second, scope: core.ScopeAccount},
		{name: "429 of a reaction", method: "reactions.add", err: &slack.RateLimitedError{RetryAfter: 2 * time.Second}, rateLimit: 2 * time.Second, scope: core.ScopeAccount},
		{name: "429 without Retry-After", method: "chat.postMessage", err: slack.StatusCodeError{Code: 429, Status: "429 Too Many Requests"},
			rateLimit: defaultRetryAfter, scope: core.ScopeGroup},
		{name: "ratelimited code", method: "chat.update", err: code("ratelimited"), rateLimit: defaultRetryAfter, scope: core.ScopeAccount},
		{name: "message gone", method: "chat.update", err: code("message_not_found"), is: core.ErrMessageGone},
		{name: "thread gone", method: "chat.postMessage", err: code("thread_not_found"), is: core.ErrThreadGone},
		{name: "channel gone", method: "chat.postMessage", err: code("channel_not_found"), permanent: true, says: "check [slack] channel"},
		{name: "not in channel", method: "chat.postMessage", err: code("not_in_channel"), permanent: true, says: "/invite @<bot>"},
		{name: "archived", method: "chat.postMessage", err: code("is_archived"), permanent: true, says: "unarchive"},
		{name: "bad token", method: "chat.postMessage", err: code("invalid_auth"), permanent: true, says: "[slack] bot_token"},
		{name: "missing scope", method: "files.upload", err: slack.SlackErrorResponse{Err: "missing_scope", Needed: "files:write"},
			permanent: true, says: "needed: files:write"},
		{name: "not the bot's", method: "chat.update", err: code("cant_update_message"), permanent: true, says: "only their own"},
		{name: "too long", method: "chat.postMessage", err: code("msg_too_long"), permanent: true},
		{name: "bad blocks", method: "chat.postMessage", err: code("invalid_blocks"), permanent: true},
		{name: "Slack failed", method: "chat.postMessage", err: code("internal_error")},
		{name: "a code parley does not know", method: "chat.postMessage", err: code("something_new")},
		{name: "5xx", method: "chat.update", err: slack.StatusCodeError{Code: 502, Status: "502 Bad Gateway"}},
		{name: "404", method: "chat.startStream", err: slack.StatusCodeError{Code: 404, Status: "404 Not Found"}, permanent: true},
		{name: "network", method: "chat.postMessage", err: &url.Error{Op: "Post", URL: "https://slack.com/api/chat.postMessage", Err: errors.New("connection reset")}},
		{name: "deadline", method: "chat.postMessage", err: fmt.Errorf("post: %w", context.DeadlineExceeded), is: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.method, tt.err)
			if tt.err == nil {
				if got != nil {
					t.Fatalf("classify(nil) = %v", got)
				}
				return
			}
			if got == nil {
				t.Fatal("classify lost the error")
			}
			if tt.is != nil && !errors.Is(got, tt.is) {
				t.Errorf("%v is not %v", got, tt.is)
			}
			if p := core.IsPermanent(got); p != tt.permanent {
				t.Errorf("%v: permanent %v, want %v", got, p, tt.permanent)
			}
			var rl *core.RateLimitError
			switch {
			case tt.rateLimit > 0 && !errors.As(got, &rl):
				t.Errorf("%v is not a *core.RateLimitError", got)
			case tt.rateLimit > 0 && (rl.RetryAfter != tt.rateLimit || rl.Scope != tt.scope):
				t.Errorf("rate limit %v in %v, want %v in %v", rl.RetryAfter, rl.Scope, tt.rateLimit, tt.scope)
			case tt.rateLimit == 0 && errors.As(got, &rl):
				t.Errorf("%v is a rate limit", got)
			}
			if !strings.Contains(got.Error(), tt.says) || !strings.Contains(got.Error(), tt.method) {
				t.Errorf("%q does not name %s and say %q", got, tt.method, tt.says)
			}
		})
	}
}

// TestRateLimitKinds: a 429 holds back only the operations that call the
// throttled method, since Slack counts each method on its own.
func TestRateLimitKinds(t *testing.T) {
	for method, want := range map[string]string{
		"chat.postMessage":            "[send]",
		"chat.update":                 "[edit rename]",
		"chat.delete":                 "[delete]",
		"assistant.threads.setStatus": "[typing]",
		"reactions.add":               "[rename]",
		"conversations.info":          "[]",
	} {
		var rl *core.RateLimitError
		if !errors.As(classify(method, &slack.RateLimitedError{RetryAfter: time.Second}), &rl) {
			t.Fatalf("%s: not a rate limit", method)
		}
		if got := fmt.Sprint(rl.Kinds); got != want {
			t.Errorf("%s holds back %s, want %s", method, got, want)
		}
	}
}
