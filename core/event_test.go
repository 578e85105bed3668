package core_test

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestEventHumanAndJournaled(t *testing.T) {
	tests := []struct {
		name      string
		event     core.Event
		human     bool
		journaled bool
	}{
		// People's input: agents are told of it; copies to other
		// platforms are a courtesy, the inbox holds the input.
		{"human message", core.Event{Kind: core.EventHumanMessage}, true, false},
		{"answer", core.Event{Kind: core.EventAnswer}, true, false},
		// A cancel is input for the agent and a notice for people.
		{"cancel", core.Event{Kind: core.EventCancel}, true, true},
		// What cannot be derived from state again.
		{"assistant message", core.Event{Kind: core.EventAssistant}, false, true},
		{"notice", core.Event{Kind: core.EventNotice}, false, true},
		{"question", core.Event{Kind: core.EventQuestion}, false, true},
		{"turn complete", core.Event{Kind: core.EventTurnComplete}, false, true},
		{"question closed", core.Event{Kind: core.EventQuestionClosed}, false, true},
		{"final output", core.Event{Kind: core.EventOutput, Final: true}, false, true},
		// Derived from the session at start-up instead.
		{"streaming output", core.Event{Kind: core.EventOutput}, false, false},
		{"session created", core.Event{Kind: core.EventSessionCreated}, false, false},
		{"session updated", core.Event{Kind: core.EventSessionUpdated}, false, false},
		{"queued", core.Event{Kind: core.EventQueued}, false, false},
		{"tool activity", core.Event{Kind: core.EventToolActivity}, false, false},
		{"tool call", core.Event{Kind: core.EventToolCall}, false, false},
		{"tool output", core.Event{Kind: core.EventToolOutput}, false, false},
		{"tool approval", core.Event{Kind: core.EventToolApproval}, false, false},
		// Final matters only for output.
		{"final on another kind", core.Event{Kind: core.EventSessionUpdated, Final: true}, false, false},
		{"no kind", core.Event{}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.event.Human(); got != tt.human {
				t.Errorf("Human() = %v, want %v", got, tt.human)
			}
			if got := tt.event.Journaled(); got != tt.journaled {
				t.Errorf("Journaled() = %v, want %v", got, tt.journaled)
			}
		})
	}
}
