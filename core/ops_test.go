package core_test

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestOpKindString(t *testing.T) {
	tests := []struct {
		kind core.OpKind
		want string
	}{
		{core.OpSend, "send"},
		{core.OpDelete, "delete"},
		{core.OpEdit, "edit"},
		{core.OpRename, "rename"},
		{core.OpTyping, "typing"},
		// Outside the list it says what it is rather than panicking.
		{core.OpKind(-1), "OpKind(-1)"},
		{core.OpTyping + 1, "OpKind(5)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.kind.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
			if got := logged(t, "kind", tt.kind); got != tt.want {
				t.Errorf("logged as %v, want %q", got, tt.want)
			}
		})
	}
}

// TestOpKindPriority holds the order the doc comment promises: the
// outbox takes the lower kind first.
func TestOpKindPriority(t *testing.T) {
	order := []core.OpKind{core.OpSend, core.OpDelete, core.OpEdit, core.OpRename, core.OpTyping}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] {
			t.Errorf("%v does not come before %v", order[i-1], order[i])
		}
	}
}
