package core_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
)

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
