package core

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Callers test them with errors.Is; producers wrap them
// with context (fmt.Errorf("…: %w", ErrX)).
var (
	// ErrNotFound is returned by Store methods when a session or other
	// record does not exist, and by the Handler for an unknown session.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned by Store.CreateSession for an id already taken.
	ErrExists = errors.New("already exists")
	// ErrUnauthorized is returned by the Handler for input from someone not
	// on the adapter's allow-list. Adapters ignore it silently: the update
	// is dealt with and must not be retried.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrSessionClosed is returned by the Handler for input to a closed
	// session.
	ErrSessionClosed = errors.New("session is closed")
	// ErrInvalid is returned by the Handler for a malformed command (empty
	// content, content too long, unknown kind); the wrapping error says
	// what is wrong.
	ErrInvalid = errors.New("invalid command")
	// ErrMessageGone is returned by adapters when the message to edit or
	// delete no longer exists on the platform.
	ErrMessageGone = errors.New("message is gone")
	// ErrThreadGone is returned by adapters when the conversation a send
	// targets was deleted or closed (Telegram's "message thread not found");
	// the outbox binds the session anew and retries once.
	ErrThreadGone = errors.New("thread is gone")
	// ErrNotModified is returned by Editor.Edit when the platform reports
	// the new content equals the old. It is success.
	ErrNotModified = errors.New("message is not modified")
	// ErrUnsupported is returned when an operation needs a capability the
	// adapter does not have.
	ErrUnsupported = errors.New("not supported by this adapter")
	// ErrSchemaTooNew is returned by store constructors for a database
	// written by a newer parley.
	ErrSchemaTooNew = errors.New("database schema is newer than this parley")
	// ErrDamaged is returned by store constructors for a data file that is
	// damaged (truncated, overwritten) or is not a parley database at all,
	// and by Store methods that find damage while serving (the store
	// library failed on what it read). The wrapping error names the file;
	// the fix is to restore the file from a backup, or to move it away and
	// start afresh. Retrying does not help.
	ErrDamaged = errors.New("the database file is damaged")
	// ErrFileTooLarge is returned by FileStore.Put for content longer
	// than the limit the caller gave; nothing is kept.
	ErrFileTooLarge = errors.New("the file is larger than parley takes")
	// ErrFileStoreFull is returned by FileStore.Put when the copy would
	// take the store past its total size; nothing is kept. The wrapping
	// error names the setting that bounds it.
	ErrFileStoreFull = errors.New("parley's store of files is full")
	// ErrEventsTruncated is returned by Store.EventsSince when events after
	// the given seq were already dropped from the bounded event log.
	ErrEventsTruncated = errors.New("events no longer in the event log")
	// ErrSuperseded is given to an Op's Done when a newer op with the same
	// Key replaced it before it ran: the newer one carries its content.
	ErrSuperseded = errors.New("operation superseded by a newer one")
	// ErrExpired is given to an Op's Done when it could not run before its
	// Expires time (a typing indicator held back by pacing).
	ErrExpired = errors.New("operation expired before it could run")
	// ErrNoCall is returned by an Op's Run that found nothing to do and
	// made no platform call (the platform shows the text already). It is
	// success; the outbox gives back the rate budget it paced the op with.
	ErrNoCall = errors.New("no platform call was needed")
	// ErrOutboxClosed is given to an Op's Done when the outbox stopped
	// before the op succeeded. Journaled operations are replayed at the
	// next start.
	ErrOutboxClosed = errors.New("outbox is closed")
)

// RateLimitError is returned by adapters when the platform refused an
// operation for exceeding a rate limit (HTTP 429). The outbox pauses exactly
// the scope the platform throttled (the operation's conversation, its
// group, or the whole account) for RetryAfter: nothing goes to that scope
// until then, and then the newest content is retried. Test for it with
// errors.As.
type RateLimitError struct {
	RetryAfter time.Duration
	// Scope is what the platform throttled; ScopeUnspecified means the
	// operation's group.
	Scope Scope
	// Kinds are the operation kinds the platform throttled within Scope,
	// for platforms that count methods separately (Slack's chat.update
	// limit does not hold back chat.postMessage); empty means every kind.
	Kinds []OpKind
	// Err is the platform's own error, if any.
	Err error
}

func (e *RateLimitError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("rate limited, retry after %s: %v", e.RetryAfter, e.Err)
	}
	return fmt.Sprintf("rate limited, retry after %s", e.RetryAfter)
}

// Unwrap returns the platform's error.
func (e *RateLimitError) Unwrap() error { return e.Err }

// permanentError marks an error that retrying cannot fix.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying: the outbox drops an operation
// that failed with it (and logs it) instead of trying again. Platform
// answers such as "bad request" are permanent; timeouts and 5xx are not.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with Permanent or wraps one of
// the sentinels that retrying cannot change.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p) || errors.Is(err, ErrUnsupported) || errors.Is(err, ErrInvalid)
}
