package core_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

func TestDecisionOf(t *testing.T) {
	tests := []struct {
		answer string
		want   string // "" for no decision
	}{
		// The options themselves, as buttons send them and people type them.
		{"Approve", core.DecisionApprove},
		{"Deny and continue", core.DecisionDenyContinue},
		{"Deny and abort", core.DecisionDenyAbort},
		{"approve", core.DecisionApprove},
		{"DENY AND ABORT", core.DecisionDenyAbort},
		{"  Deny and continue\n", core.DecisionDenyContinue},
		// A decision's own name.
		{"deny_continue", core.DecisionDenyContinue},
		{"deny_abort", core.DecisionDenyAbort},
		// The option's number, as platforms without buttons show them.
		{"1", core.DecisionApprove},
		{"2", core.DecisionDenyContinue},
		{" 3 ", core.DecisionDenyAbort},
		// Anything else decides nothing.
		{"", ""},
		{"0", ""},
		{"4", ""},
		{"01", ""},
		{"yes", ""},
		{"Deny", ""},
		{"Approve it", ""},
	}
	for _, tt := range tests {
		t.Run(tt.answer, func(t *testing.T) {
			got, ok := core.DecisionOf(tt.answer)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("DecisionOf(%q) = %q, %v; want %q, %v", tt.answer, got, ok, tt.want, tt.want != "")
			}
		})
	}
}

// TestApprovalOptionsMatchDecisions holds the two lists to each other:
// every option and every option's number decides its own decision.
func TestApprovalOptionsMatchDecisions(t *testing.T) {
	if len(core.ApprovalOptions) != len(core.Decisions) {
		t.Fatalf("%d options for %d decisions", len(core.ApprovalOptions), len(core.Decisions))
	}
	for i, o := range core.ApprovalOptions {
		if got, ok := core.DecisionOf(o); !ok || got != core.Decisions[i] {
			t.Errorf("DecisionOf(%q) = %q, %v; want %q", o, got, ok, core.Decisions[i])
		}
	}
}

func TestToolStateFailed(t *testing.T) {
	code := func(c int) *int { return &c }
	tests := []struct {
		name   string
		state  core.ToolState
		failed bool
	}{
		{"running", core.ToolState{CallID: "c1"}, false},
		{"done without an exit code", core.ToolState{CallID: "c1", Done: true}, false},
		{"exit 0", core.ToolState{CallID: "c1", Done: true, ExitCode: code(0)}, false},
		{"exit 1", core.ToolState{CallID: "c1", Done: true, ExitCode: code(1)}, true},
		{"killed", core.ToolState{CallID: "c1", Done: true, ExitCode: code(-9)}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.state.Failed(); got != tt.failed {
				t.Errorf("Failed() = %v, want %v", got, tt.failed)
			}
		})
	}
}

func TestFindTool(t *testing.T) {
	tools := []core.ToolState{{CallID: "a"}, {CallID: "b"}, {CallID: "c"}}
	tests := []struct {
		name  string
		tools []core.ToolState
		id    string
		want  int
	}{
		{"first", tools, "a", 0},
		{"middle", tools, "b", 1},
		{"last", tools, "c", 2},
		{"unknown", tools, "d", -1},
		{"empty id", tools, "", -1},
		{"no tools", nil, "a", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := core.FindTool(tt.tools, tt.id); got != tt.want {
				t.Errorf("FindTool(%q) = %d, want %d", tt.id, got, tt.want)
			}
		})
	}
}

func TestStateCmd(t *testing.T) {
	n := core.MaxStateCmd
	tests := []struct {
		name string
		cmd  string
		want string
	}{
		{"short", "go test ./...", "go test ./..."},
		{"empty", "", ""},
		{"exactly the bound", strings.Repeat("a", n), strings.Repeat("a", n)},
		{"one byte over", strings.Repeat("a", n+1), strings.Repeat("a", n)},
		// A character across the bound is left out whole.
		{"two-byte character across the bound", strings.Repeat("a", n-1) + "é" + "tail", strings.Repeat("a", n-1)},
		{"four-byte character across the bound", strings.Repeat("a", n-2) + "😀" + "tail", strings.Repeat("a", n-2)},
		{"character ending at the bound", strings.Repeat("a", n-2) + "é" + "tail", strings.Repeat("a", n-2) + "é"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := core.StateCmd(tt.cmd)
			if got != tt.want {
				t.Errorf("StateCmd kept %d bytes %q…, want %d bytes", len(got), head(got), len(tt.want))
			}
			if !utf8.ValidString(got) {
				t.Errorf("StateCmd cut inside a character")
			}
		})
	}
}

func head(s string) string {
	if len(s) > 20 {
		return s[:20]
	}
	return s
}

func TestTailKeep(t *testing.T) {
	tests := []struct {
		name string
		s    string
		max  int
		want string
	}{
		{"fits", "ok\n", 16, "ok\n"},
		{"exactly max", "12345", 5, "12345"},
		{"empty", "", 0, ""},
		{"keeps the end", "line 1\nline 2\nexit 1\n", 7, "… [14 bytes cut]\nexit 1\n"},
		{"nothing kept", "abc", 0, "… [3 bytes cut]\n"},
		// The cut moves forward to a character's start: fewer than max
		// bytes are kept rather than half a character.
		{"cut inside a character", strings.Repeat("é", 10), 5, "… [16 bytes cut]\néé"},
		{"cut at a character", strings.Repeat("é", 10), 4, "… [16 bytes cut]\néé"},
		{"cut inside a four-byte character", "ab😀cd", 4, "… [6 bytes cut]\ncd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := core.TailKeep(tt.s, tt.max)
			if got != tt.want {
				t.Errorf("TailKeep(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("TailKeep cut inside a character: %q", got)
			}
		})
	}
}
