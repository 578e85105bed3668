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

// TestToolCallDigest: a call's digest is the same for the same tool,
// command and input however the input's JSON is written, and differs when
// any of them differs, field boundaries included. The call id, reason or
// decision are not part of it.
func TestToolCallDigest(t *testing.T) {
	base := core.ToolCall{CallID: "c1", Tool: "Write", Cmd: "notes.txt", Input: []byte(`{"file_path":"notes.txt","content":"a<b","n":1.50}`)}
	same := []core.ToolCall{
		{CallID: "c1", Tool: "Write", Cmd: "notes.txt", Input: []byte(" {\n \"n\": 1.50, \"content\": \"a\\u003cb\",\"file_path\":\"notes.txt\" } ")},
		{CallID: "other", Tool: "Write", Cmd: "notes.txt", Input: base.Input, Decision: core.DecisionApprove},
	}
	for _, c := range same {
		if c.Digest() != base.Digest() {
			t.Errorf("%+v has digest %s, want the same as %s", c, c.Digest(), base.Digest())
		}
	}
	other := []core.ToolCall{
		{Tool: "Edit", Cmd: "notes.txt", Input: base.Input},
		{Tool: "Write", Cmd: "notes.md", Input: base.Input},
		{Tool: "Write", Cmd: "notes.txt", Input: []byte(`{"file_path":"notes.txt","content":"a<b","n":1.5}`)},
		{Tool: "Write", Cmd: "notes.txt"},
		{Tool: "Writenotes.txt", Input: base.Input},
		{Tool: "Write", Cmd: "notes.txt", Input: []byte(`{"file_path":"notes.txt","content":"a<b","n":1.50`)}, // not JSON
	}
	seen := map[string]bool{base.Digest(): true}
	for _, c := range other {
		d := c.Digest()
		if seen[d] {
			t.Errorf("%+v has a digest seen before: %s", c, d)
		}
		seen[d] = true
	}
	// No input and a null one ask about the same call.
	if a, b := (core.ToolCall{Tool: "t", Cmd: "c"}).Digest(), (core.ToolCall{Tool: "t", Cmd: "c", Input: []byte("null")}).Digest(); a != b {
		t.Errorf("without input %s, with null %s", a, b)
	}
	if (core.ToolCall{Tool: "a", Cmd: "bc"}).Digest() == (core.ToolCall{Tool: "ab", Cmd: "c"}).Digest() {
		t.Error("the field boundary is not part of the digest")
	}
}
