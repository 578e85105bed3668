package core

import (
	"errors"
	"time"
)

// PlatformState says why an adapter's platform is not up, in one word that
// names no internals and no secret: it is shown to anyone who can reach
// parley's health probe.
type PlatformState string

// The states of a platform that is not up.
const (
	// PlatformStarting: its first start has not finished yet.
	PlatformStarting PlatformState = "starting"
	// PlatformUnreachable: it did not answer, or failed on its side (a
	// network error, a timeout, a 5xx). Retried with capped backoff.
	PlatformUnreachable PlatformState = "unreachable"
	// PlatformRefused: it answered and refused parley's configuration (a
	// token it does not know, a chat the bot may not use): the log and
	// parley doctor say the fix. Retried slowly, since some of these are
	// fixed on the platform's side without restarting parley.
	PlatformRefused PlatformState = "refused"
	// PlatformStopped: the adapter stopped receiving without an error of
	// the platform's. Retried with capped backoff.
	PlatformStopped PlatformState = "stopped"
)

// PlatformStatus is whether an adapter's platform is usable, as the daemon
// running the adapter knows it.
type PlatformStatus struct {
	// Up is true once the adapter started (its configuration checked
	// against the platform) and while it runs.
	Up bool
	// State says why it is not up; empty when Up.
	State PlatformState
	// Since is when the platform last went up or down.
	Since time.Time
	// NextRetry is when the daemon starts the adapter again; zero when Up.
	NextRetry time.Time
}

// PlatformHealth reports the status of every platform a daemon runs (the
// daemon implements it; the web adapter serves it on its health probe).
type PlatformHealth interface {
	// Platforms returns a snapshot, by adapter. It does not block.
	Platforms() map[AdapterName]PlatformStatus
}

// WithFix attaches to err the fix for whoever runs parley, apart from its
// message: the daemon logs it beside the error, parley doctor shows it as
// the finding's fix. Adapters use it for errors whose message does not
// already say what to do (a platform that cannot be reached).
func WithFix(err error, fix string) error {
	if err == nil {
		return nil
	}
	return &fixError{err: err, fix: fix}
}

type fixError struct {
	err error
	fix string
}

func (e *fixError) Error() string { return e.err.Error() }
func (e *fixError) Unwrap() error { return e.err }

// Fix returns the fix given to WithFix.
func (e *fixError) Fix() string { return e.fix }

// FixOf returns the fix attached to err (or to an error it wraps) with
// WithFix, or any error's Fix() string method, and "" when none is.
func FixOf(err error) string {
	if f, ok := errors.AsType[interface {
		error
		Fix() string
	}](err); ok {
		return f.Fix()
	}
	return ""
}
