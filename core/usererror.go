package core

import "errors"

// UserError is an error with words for the person (or agent) who caused
// it: the Handler returns one for every refusal it explains — a closed
// session, no session at a place, content that is empty or too long — and
// the shared command parser for a command typed wrongly. Adapters show Msg
// (UserMessage finds it) instead of taking an error string apart; Err keeps
// the sentinel (ErrInvalid, ErrSessionClosed, ErrNotFound, …) that decides
// what the error means, for errors.Is, and the detail for logs.
//
// Msg is written like an error string without a package prefix: plain
// words, lower case, no final period ("the title is longer than 256 bytes"),
// so that an adapter can frame it ("⚠️ …") or add its own hint.
type UserError struct {
	Msg string
	Err error
}

// Error returns the wrapped error's text, which the logs want; Msg when
// nothing is wrapped.
func (e *UserError) Error() string {
	if e.Err == nil {
		return e.Msg
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *UserError) Unwrap() error { return e.Err }

// GenericUserMessage is what UserMessage says about an error that has no
// words for people: it says nothing of the internals, which the log has.
const GenericUserMessage = "something went wrong inside parley; its log has the details"

// UserMessage returns the message for people carried by the first
// *UserError in err's chain (found with errors.As), and true; for an error
// without one, or whose Msg is empty, it returns GenericUserMessage and
// false, and for nil "" and false.
func UserMessage(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	var ue *UserError
	if errors.As(err, &ue) && ue.Msg != "" {
		return ue.Msg, true
	}
	return GenericUserMessage, false
}
