package core_test

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestAgentStatusListening(t *testing.T) {
	const s1, s2 core.SessionID = "01ARZ3NDEK0000000000000001", "01ARZ3NDEK0000000000000002"
	tests := []struct {
		name   string
		status core.AgentStatus
		s1, s2 bool // whether an agent listens to s1 and s2
	}{
		{"nothing", core.AgentStatus{}, false, false},
		{"ready, nobody listens", core.AgentStatus{Ready: true}, false, false},
		{"one session", core.AgentStatus{Ready: true, Sessions: map[core.SessionID]int{s1: 1}}, true, false},
		{"two connections to one session", core.AgentStatus{Ready: true, Sessions: map[core.SessionID]int{s2: 2}}, false, true},
		{"a zero count is no listener", core.AgentStatus{Ready: true, Sessions: map[core.SessionID]int{s1: 0}}, false, false},
		{"all sessions", core.AgentStatus{Ready: true, All: 1}, true, true},
		// A server that does not serve delivers no notification, whoever
		// subscribed.
		{"not ready", core.AgentStatus{All: 3, Sessions: map[core.SessionID]int{s1: 1}}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.status.Listening(s1); got != tt.s1 {
				t.Errorf("Listening(s1) = %v, want %v", got, tt.s1)
			}
			if got := tt.status.Listening(s2); got != tt.s2 {
				t.Errorf("Listening(s2) = %v, want %v", got, tt.s2)
			}
		})
	}
}
