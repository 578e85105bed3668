package slack

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// Slack shows no typing indicator for bots. It shows an app's status under
// a thread instead — "is working…" — set with assistant.threads.setStatus,
// which takes the chat:write scope and works in channels' threads as well
// as in AI-app threads (since March 2026; before, it needed the Agents &
// AI Apps feature). Slack clears the status when the app next posts in
// the thread, or after two minutes. Where Slack refuses the method (an
// older workspace, a missing scope), the adapter remembers the refusal
// and makes no further calls: typing is silently off; a refusal for one
// thread (invalid_thread_ts) turns it off for that thread.
//
// Core renews typing every few seconds; the status lasts until the app
// posts, so one call per thread every typingRenew is enough.

const (
	typingStatus = "is working…"
	typingRenew  = 10 * time.Second
)

// refusals that mean the workspace or app does not offer assistant
// threads at all, rather than that this one thread cannot have a status.
var typingOff = map[string]bool{
	"not_allowed": true, "missing_scope": true, "unknown_method": true, "not_allowed_token_type": true,
	"feature_not_enabled": true, "method_not_supported_for_channel_type": true, "team_not_allowed": true,
}

// typingState is what Typing remembers.
type typingState struct {
	mu      sync.Mutex
	off     bool
	last    map[core.Place]time.Time
	refused map[core.Place]bool
}

// Typing implements core.TypingNotifier with the assistant-thread status.
// It returns core.ErrNoCall when it made no call (status set recently, or
// Slack refused the method before).
func (a *Adapter) Typing(ctx context.Context, p core.Place) error {
	now := time.Now()
	if p.Thread == "" || !a.typing.due(p, now) {
		return core.ErrNoCall
	}
	err := a.api.SetAssistantThreadsStatusContext(ctx, slack.AssistantThreadsSetStatusParameters{
		ChannelID: p.Chat, ThreadTS: p.Thread, Status: typingStatus,
	})
	if err == nil {
		return nil
	}
	a.typing.forget(p)
	var sc slack.StatusCodeError
	code := errorCode(err)
	switch {
	case typingOff[code] || errors.As(err, &sc) && sc.Code == http.StatusNotFound:
		a.typing.disable()
		a.log.Info("Slack offers no assistant-thread status here; no typing indicator", "reason", err)
		return nil
	case code != "" && code != codeRateLimited && !transientCodes[code]:
		a.typing.refuse(p)
		a.log.Debug("assistant-thread status refused for this thread", "channel", p.Chat, "thread", p.Thread, "reason", code)
		return nil
	}
	return classify("assistant.threads.setStatus", err) // rate limited, or Slack failed
}

// due reports whether p's status should be set now, and if so counts it
// as set.
func (t *typingState) due(p core.Place, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.off || t.refused[p] {
		return false
	}
	if t.last == nil {
		t.last = map[core.Place]time.Time{}
	}
	if last, ok := t.last[p]; ok && now.Sub(last) < typingRenew {
		return false
	}
	if len(t.last) > 1024 {
		for q, at := range t.last {
			if now.Sub(at) >= typingRenew {
				delete(t.last, q)
			}
		}
	}
	t.last[p] = now
	return true
}

func (t *typingState) forget(p core.Place) {
	t.mu.Lock()
	delete(t.last, p)
	t.mu.Unlock()
}

func (t *typingState) refuse(p core.Place) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.refused == nil {
		t.refused = map[core.Place]bool{}
	}
	t.refused[p] = true
}

func (t *typingState) disable() {
	t.mu.Lock()
	t.off = true
	t.mu.Unlock()
}
