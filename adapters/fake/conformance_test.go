package fake_test

import (
	"errors"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
)

// The fake is both the adapter and its platform, so its hooks are its own
// test methods. It runs the suite twice: as a platform that lets the bot
// delete people's messages (Telegram) and as one that does not (Slack).
func TestConformance(t *testing.T) {
	for _, others := range []bool{true, false} {
		name := "delete others"
		if !others {
			name = "own messages only"
		}
		t.Run(name, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Harness{InMemory: true, New: func(t *testing.T) adaptertest.Env {
				return newEnv(fake.New("fake", caps(others)))
			}})
		})
	}
}

// caps are limits loose enough for the suite's direct calls, which do not
// go through an outbox.
func caps(deleteOthers bool) core.Capabilities {
	return core.Capabilities{
		MaxLength: 500, LengthUnit: core.Runes, Markup: core.MarkupMarkdown, DeleteOthers: deleteOthers, Buttons: true,
		Limits: []core.Limit{
			{Scope: core.ScopeConversation, Kinds: []core.OpKind{core.OpSend, core.OpEdit, core.OpDelete}, Rate: core.Rate{N: 100, Per: time.Second}},
			{Scope: core.ScopeAccount, Rate: core.Rate{N: 1000, Per: time.Second}},
		},
	}
}

// methods are the fake's names for the outbox's operation kinds.
var methods = map[core.OpKind]string{
	core.OpSend: "send", core.OpEdit: "edit", core.OpDelete: "delete", core.OpRename: "rename", core.OpTyping: "typing",
}

func newEnv(a *fake.Adapter) adaptertest.Env {
	kinds := map[string]core.OpKind{"file": core.OpSend, "bind": core.OpSend}
	for k, m := range methods {
		kinds[m] = k
	}
	return adaptertest.Env{
		Adapter: a,
		Shown: func(p core.Place) []adaptertest.ShownMessage {
			var out []adaptertest.ShownMessage
			for _, m := range a.Messages(p) {
				sm := adaptertest.ShownMessage{ID: m.ID, Text: m.Text}
				for _, b := range m.Buttons {
					sm.Buttons = append(sm.Buttons, b.Label)
				}
				out = append(out, sm)
			}
			return out
		},
		Vanish:       func(ref core.MessageRef) { a.Vanish(ref.ID) },
		DeleteThread: a.DeleteThread,
		RateLimitNext: func(k core.OpKind, d time.Duration) {
			a.FailNext(methods[k], &core.RateLimitError{RetryAfter: d, Scope: core.ScopeConversation, Err: errors.New("fake: Too Many Requests")})
		},
		// The fake answers with the scope of the limit it enforced, and
		// the suite's injected 429s name the conversation.
		RateLimitScope: func(core.OpKind) core.Scope { return core.ScopeConversation },
		Title:          a.Title,
		Calls: func() []adaptertest.Call {
			var out []adaptertest.Call
			for _, op := range a.Ops() {
				c := adaptertest.Call{Time: op.Time, Kind: kinds[op.Method], Place: op.Place}
				if op.Err != nil {
					c.Err = op.Err.Error()
				}
				out = append(out, c)
			}
			return out
		},
		InjectPersonMessage: func(p core.Place, text string) core.MessageRef {
			return a.Receive(core.Command{Kind: core.SendMessage, Place: p, Text: text}).Ref
		},
	}
}
