package core_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

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
