package core

// UserError is an error with words for the person (or agent) who caused
// it: the Handler returns one for every refusal it explains — a closed
// session, no session at a place, content that is empty or too long — and
// the shared command parser for a command typed wrongly. Adapters show Msg
// (core/delivery.UserMessage finds it) instead of taking an error string apart; Err keeps
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
