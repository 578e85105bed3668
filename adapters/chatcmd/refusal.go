package chatcmd

import (
	"errors"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Refusal says what a person is told when the Handler did not take their
// input, the same way on every platform: nothing for a stranger (ignored
// silently), the Handler's own words otherwise (delivery.UserMessage), and for a
// closed session or a place without one how to start a session, in the
// platform's own words (afterClosed: "/new starts another one.", noSession:
// "/new starts one."). settled is false
// for any other error: the input was not stored, and the platform update
// must be retried, not acknowledged. For a nil err it returns "", true.
func Refusal(err error, afterClosed, noSession string) (notice string, settled bool) {
	msg, ok := delivery.UserMessage(err)
	switch {
	case err == nil, errors.Is(err, core.ErrUnauthorized):
		return "", true
	case errors.Is(err, core.ErrSessionClosed):
		if !ok {
			msg = "this session is closed"
		}
		return "✅ " + Capitalize(msg) + ". " + afterClosed, true
	case errors.Is(err, core.ErrNotFound):
		if !ok {
			msg = "there is no session here"
		}
		return Capitalize(msg) + ". " + noSession, true
	case errors.Is(err, core.ErrInvalid):
		return "⚠️ " + Capitalize(msg), true
	}
	return "", false
}

// Capitalize makes a message in error-string style (core.UserError's Msg)
// start a sentence.
func Capitalize(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
