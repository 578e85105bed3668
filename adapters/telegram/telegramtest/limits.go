package telegramtest

import (
	"fmt"
	"strconv"
	"time"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// Rate is at most N calls in any window of length Per.
type Rate struct {
	N   int
	Per time.Duration
}

// Rates are the limits a Server enforces with Options.Limits. Every send,
// edit, delete, draft and topic call counts, against all three windows at
// once; a call refused with 429 does not count.
type Rates struct {
	// Chat limits one chat: 1 per second by default, counted per chat as
	// Telegram documents it: a supergroup and all its forum topics
	// together.
	Chat Rate
	// PerTopic is an experiment, not Telegram: it counts Chat per forum
	// topic instead, as if every topic were a chat of its own, to see how
	// a client would fare if Telegram were that lenient. Telegram does not
	// document it; keep it off to test against what Telegram says.
	PerTopic bool
	// Group limits one group or supergroup across all its topics: 20 per
	// minute by default.
	Group Rate
	// Global limits the bot: 30 per second by default.
	Global Rate
	// Slack is how much earlier than its window allows a call may still
	// pass, absorbing the jitter between a client's pacing clock and the
	// server's: 100ms by default, none if negative.
	Slack time.Duration
}

func (r Rates) withDefaults() Rates {
	if r.Chat.N == 0 {
		r.Chat = Rate{N: 1, Per: time.Second}
	}
	if r.Group.N == 0 {
		r.Group = Rate{N: 20, Per: time.Minute}
	}
	if r.Global.N == 0 {
		r.Global = Rate{N: 30, Per: time.Second}
	}
	switch {
	case r.Slack == 0:
		r.Slack = 100 * time.Millisecond
	case r.Slack < 0:
		r.Slack = 0
	}
	return r
}

// limiter keeps sliding windows of accepted calls.
type limiter struct {
	rates   Rates
	windows fakeserver.Windows
}

func newLimiter(r Rates) limiter {
	r = r.withDefaults()
	return limiter{rates: r, windows: fakeserver.Windows{Slack: r.Slack}}
}

// limit counts a call to chat c (thread within it) at r.now, or refuses it
// with 429 and the seconds until every window it is over has room again.
// It is a no-op without Options.Limits. Callers hold s.mu.
func (s *Server) limit(r *request, c *chat, thread int) *Error {
	if !s.opts.Limits {
		return nil
	}
	rates := s.limiter.rates
	window := func(key string, r Rate) fakeserver.Window {
		return fakeserver.Window{Key: key, N: r.N, Per: r.Per}
	}
	chatKey := "chat:" + strconv.FormatInt(c.id, 10)
	if rates.PerTopic {
		chatKey += ":" + strconv.Itoa(thread)
	}
	ws := []fakeserver.Window{window("global", rates.Global), window(chatKey, rates.Chat)}
	if c.kind != kindPrivate {
		ws = append(ws, window("group:"+strconv.FormatInt(c.id, 10), rates.Group))
	}
	if wait := s.limiter.windows.Take(r.now, ws...); wait > 0 {
		s.limited++
		secs := max(int((wait+time.Second-1)/time.Second), 1)
		return &Error{Code: 429, Description: fmt.Sprintf("Too Many Requests: retry after %d", secs), RetryAfter: secs}
	}
	return nil
}
