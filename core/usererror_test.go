package core_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestUserMessage(t *testing.T) {
	closed := &core.UserError{Msg: "this session is closed", Err: fmt.Errorf("commands: session 1: %w", core.ErrSessionClosed)}
	tests := []struct {
		name   string
		err    error
		want   string
		wantOK bool
	}{
		{"nil", nil, "", false},
		{"plain error", errors.New("bolt: disk full"), core.GenericUserMessage, false},
		{"sentinel only", fmt.Errorf("commands: %w", core.ErrInvalid), core.GenericUserMessage, false},
		{"user error", closed, "this session is closed", true},
		{"wrapped user error", fmt.Errorf("telegram: handle: %w", closed), "this session is closed", true},
		{"joined", errors.Join(errors.New("other"), closed), "this session is closed", true},
		{"outermost wins", &core.UserError{Msg: "outer", Err: closed}, "outer", true},
		{"empty message counts as none", &core.UserError{Err: core.ErrInvalid}, core.GenericUserMessage, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := core.UserMessage(tt.err)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("UserMessage = %q, %v; want %q, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestUserErrorWraps(t *testing.T) {
	tests := []struct {
		name      string
		err       *core.UserError
		wantText  string
		sentinel  error
		wantIsErr bool
	}{
		{"detail for logs", &core.UserError{Msg: "content is empty", Err: fmt.Errorf("commands: content is empty: %w", core.ErrInvalid)},
			"commands: content is empty: invalid command", core.ErrInvalid, true},
		{"message alone", &core.UserError{Msg: "content is empty"}, "content is empty", core.ErrInvalid, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.wantText {
				t.Errorf("Error() = %q, want %q", got, tt.wantText)
			}
			if got := errors.Is(tt.err, tt.sentinel); got != tt.wantIsErr {
				t.Errorf("errors.Is(%v) = %v, want %v", tt.sentinel, got, tt.wantIsErr)
			}
		})
	}
}
