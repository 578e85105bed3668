package slacktest

import (
	"net/http"
	"time"

	"github.com/parley-chat/parley/adapters/internal/fakeserver"
)

// quota is at most N calls in any window of length Per.
type quota struct {
	N   int
	Per time.Duration
}

// chat.postMessage's special limits: one message a second in each
// channel (Slack tolerates short bursts; the fake does not) and 300 a
// minute in the workspace.
var (
	postPerChannel   = quota{N: 1, Per: time.Second}
	postPerWorkspace = quota{N: 300, Per: time.Minute}
)

// jitter is how much earlier than its window allows a call may still
// pass: it absorbs the difference between a client's pacing clock and the
// arrival of its requests, which scheduling on a loaded machine delays
// unevenly.
const jitter = 100 * time.Millisecond

// methodWindow is the window of a Web API method in a workspace: Slack
// counts each method on its own, at its tier's rate, per workspace and app
// (one app here), so chat.update's 50 a minute do not hold back
// chat.appendStream's 100, nor one workspace another's.
func methodWindow(team, method string, rate quota) window {
	return window{key: "method:" + team + ":" + method, rate: rate}
}

// limiter keeps sliding windows of accepted calls, by key.
type limiter struct {
	windows fakeserver.Windows
}

func newLimiter() limiter { return limiter{windows: fakeserver.Windows{Slack: jitter}} }

// window is one sliding window a call counts against.
type window struct {
	key  string
	rate quota
}

// limit counts a call at now against every window, or refuses it with 429
// and the time until all of them have room again. A refused call counts
// against none. It is a no-op without Options.Limits. Callers hold s.mu.
func (s *Server) limit(now time.Time, ws ...window) *apiError {
	if !s.opts.Limits {
		return nil
	}
	fw := make([]fakeserver.Window, len(ws))
	for i, w := range ws {
		fw[i] = fakeserver.Window{Key: w.key, N: w.rate.N, Per: w.rate.Per}
	}
	if wait := s.limiter.windows.Take(now, fw...); wait > 0 {
		return &apiError{code: "ratelimited", status: http.StatusTooManyRequests, retryAfter: time.Duration(retrySeconds(wait)) * time.Second, limited: true}
	}
	return nil
}
