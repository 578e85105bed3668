package telegram

import (
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// TestLimitsCountPerChat: Telegram counts its one message a second per
// chat — a supergroup with all its topics — so the adapter declares it for
// the group scope, where the outbox shares it between the topics, and
// declares nothing per topic that would let five topics send five messages
// to one chat in a second.
func TestLimitsCountPerChat(t *testing.T) {
	a := &Adapter{}
	var perSecond, perMinute bool
	for _, l := range a.Capabilities().Limits {
		if l.Scope == core.ScopeConversation {
			t.Errorf("limit %+v counts per topic; Telegram counts per chat", l)
		}
		messages := slices.Equal(l.Kinds, []core.OpKind{core.OpSend, core.OpEdit, core.OpDelete, core.OpRename})
		switch {
		case l.Scope == core.ScopeGroup && messages && l.Rate == core.Rate{N: 1, Per: time.Second}:
			perSecond = true
		case l.Scope == core.ScopeGroup && messages && l.Rate == core.Rate{N: 20, Per: time.Minute}:
			perMinute = true
		}
	}
	if !perSecond || !perMinute {
		t.Errorf("limits %+v: want 1 message a second and 20 a minute per chat (group scope; sends, edits, deletes and renames all count)", a.Capabilities().Limits)
	}
}
