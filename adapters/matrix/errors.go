package matrix

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"

	"github.com/parley-chat/parley/core"
)

// op says what a failed call was for, which decides what a homeserver's
// M_NOT_FOUND or M_FORBIDDEN means for core.
type op int

const (
	opSend   op = iota // a new event in a room
	opEdit             // an m.replace of one of the bot's events
	opRedact           // a redaction
	opState            // a state event (the room's name)
	opOther            // anything else (joins, room creation, reads)
)

// classify maps a homeserver's error to core's contract:
//
//   - M_LIMIT_EXCEEDED (HTTP 429) is a *core.RateLimitError for the whole
//     account (homeservers count events per user), after retry_after_ms,
//     else the Retry-After header, else a second;
//   - M_NOT_FOUND is core.ErrMessageGone for edits and redactions and
//     core.ErrThreadGone for sends (the room is unknown);
//   - M_FORBIDDEN on a send is core.ErrThreadGone when the bot is not in
//     the room (the caller checks membership and says so with gone); any
//     other refusal (M_FORBIDDEN, M_BAD_JSON, M_TOO_LARGE, …) is
//     core.Permanent: retrying cannot change it;
//   - an unknown token, 5xx answers, timeouts and network errors are
//     transient: the outbox retries them, so nothing is lost while the
//     homeserver is down or the token is being replaced.
func classify(what string, o op, err error, gone bool) error {
	if err == nil {
		return nil
	}
	var herr mautrix.HTTPError
	if !errors.As(err, &herr) || herr.RespError == nil {
		if herr.Response != nil && herr.Response.StatusCode >= 400 && herr.Response.StatusCode < 500 &&
			herr.Response.StatusCode != http.StatusTooManyRequests && herr.Response.StatusCode != http.StatusRequestTimeout {
			return core.Permanent(fmt.Errorf("matrix: %s: %w", what, err))
		}
		return fmt.Errorf("matrix: %s: %w", what, err)
	}
	re := herr.RespError
	switch {
	case errors.Is(err, mautrix.MLimitExceeded) || herr.IsStatus(http.StatusTooManyRequests):
		return &core.RateLimitError{RetryAfter: retryAfter(herr), Scope: core.ScopeAccount, Err: fmt.Errorf("matrix: %s: %w", what, err)}
	case re.ErrCode == mautrix.MNotFound.ErrCode && (o == opEdit || o == opRedact):
		return fmt.Errorf("matrix: %s: %w: %w", what, core.ErrMessageGone, err)
	case re.ErrCode == mautrix.MNotFound.ErrCode && (o == opSend || o == opState):
		return fmt.Errorf("matrix: %s: %w: %w", what, core.ErrThreadGone, err)
	case gone && o == opEdit:
		// The message is out of reach with its room; core posts anew,
		// and that send finds the room gone.
		return fmt.Errorf("matrix: %s: the bot is not in the room: %w: %w", what, core.ErrMessageGone, err)
	case gone && (o == opSend || o == opState):
		return fmt.Errorf("matrix: %s: the bot is not in the room: %w: %w", what, core.ErrThreadGone, err)
	case re.ErrCode == mautrix.MUnknownToken.ErrCode:
		return fmt.Errorf("matrix: %s: the access token is not valid (any more): %w", what, err)
	case herr.Response != nil && herr.Response.StatusCode >= 500:
		return fmt.Errorf("matrix: %s: %w", what, err)
	}
	return core.Permanent(fmt.Errorf("matrix: %s: %w", what, err))
}

// forbidden reports whether err is the homeserver's M_FORBIDDEN.
func forbidden(err error) bool { return errors.Is(err, mautrix.MForbidden) }

// retryAfter is how long a 429 asks to wait: retry_after_ms from the body,
// else the Retry-After header, else one second.
func retryAfter(herr mautrix.HTTPError) time.Duration {
	if herr.RespError != nil {
		switch v := herr.RespError.ExtraData["retry_after_ms"].(type) {
		case float64:
			if v > 0 {
				return time.Duration(v) * time.Millisecond
			}
		case string:
			if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond
			}
		}
	}
	if herr.Response != nil {
		if s, err := strconv.Atoi(herr.Response.Header.Get("Retry-After")); err == nil && s > 0 {
			return time.Duration(s) * time.Second
		}
	}
	return time.Second
}
