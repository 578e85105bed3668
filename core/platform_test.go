package core_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
)

// fixer is an error of another package that says its own fix.
type fixer struct{}

func (fixer) Error() string { return "matrix: the homeserver refused the token" }
func (fixer) Fix() string   { return "log in again with parley login matrix" }

func TestWithFix(t *testing.T) {
	if core.WithFix(nil, "anything") != nil {
		t.Error("WithFix(nil) is not nil")
	}
	down := fmt.Errorf("slack: connect: %w", errors.New("dial tcp: connection refused"))
	err := core.WithFix(down, "check the network and proxy settings")
	if err.Error() != down.Error() {
		t.Errorf("WithFix changed the message to %q, want %q", err.Error(), down.Error())
	}
	if errors.Unwrap(err) != down {
		t.Errorf("errors.Unwrap(WithFix(err)) = %v, want err", errors.Unwrap(err))
	}
	refused := core.WithFix(fmt.Errorf("telegram: %w", core.ErrUnauthorized), "add the bot to the group")
	if !errors.Is(refused, core.ErrUnauthorized) {
		t.Error("WithFix hides a wrapped sentinel from errors.Is")
	}
}

func TestFixOf(t *testing.T) {
	base := errors.New("telegram: getMe: timeout")
	fixed := core.WithFix(base, "check that the Telegram API can be reached")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"no fix", base, ""},
		{"with fix", fixed, "check that the Telegram API can be reached"},
		{"wrapped", fmt.Errorf("daemon: start telegram: %w", fixed), "check that the Telegram API can be reached"},
		{"joined", errors.Join(errors.New("other"), fixed), "check that the Telegram API can be reached"},
		{"outermost fix wins", core.WithFix(fmt.Errorf("outer: %w", fixed), "the outer fix"), "the outer fix"},
		{"empty fix", core.WithFix(base, ""), ""},
		{"another package's Fix method", fixer{}, "log in again with parley login matrix"},
		{"another package's, wrapped", fmt.Errorf("doctor: %w", fixer{}), "log in again with parley login matrix"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.FixOf(tt.err); got != tt.want {
				t.Errorf("FixOf(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}
