package chatcmd_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/core"
)

func TestRefusal(t *testing.T) {

	tests := []struct {
		name    string
		err     error
		notice  string
		settled bool
	}{
		{"stored", nil, "", true},
		{"stranger", fmt.Errorf("x: %w", core.ErrUnauthorized), "", true},
		{"closed, in the handler's words", &core.UserError{Msg: "this session is closed", Err: core.ErrSessionClosed}, "✅ This session is closed. /new starts another one.", true},
		{"closed, no words", core.ErrSessionClosed, "✅ This session is closed. /new starts another one.", true},
		{"no session", fmt.Errorf("x: %w", core.ErrNotFound), "There is no session here. /new starts one.", true},
		{"invalid", &core.UserError{Msg: "the title is longer than 256 bytes", Err: core.ErrInvalid}, "⚠️ The title is longer than 256 bytes", true},
		{"not stored", errors.New("disk full"), "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			notice, settled := chatcmd.Refusal(tt.err, "/new starts another one.", "/new starts one.")
			if notice != tt.notice || settled != tt.settled {
				t.Errorf("Refusal = %q, %v; want %q, %v", notice, settled, tt.notice, tt.settled)
			}
		})
	}
}
