package claudecode

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestShow(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, tc := range []struct {
		tool, input, want string
	}{
		{"Bash", `{"command":"go test ./...","description":"run the tests"}`, "go test ./..."},
		{"Read", `{"file_path":"/src/main.go","limit":20}`, "/src/main.go"},
		{"Write", `{"file_path":"/src/a.go","content":"package a"}`, "/src/a.go"},
		{"Edit", `{"file_path":"/src/b.go","old_string":"x","new_string":"y"}`, "/src/b.go"},
		{"Grep", `{"pattern":"func main","path":"."}`, "func main"},
		{"Glob", `{"pattern":"**/*.go"}`, "**/*.go"},
		{"WebFetch", `{"url":"https://example.com","prompt":"summarise"}`, "https://example.com"},
		{"TodoWrite", `{ "todos": [ {"content": "a"} ] }`, `{"todos":[{"content":"a"}]}`},
		{"Task", `{"prompt":"` + long + `"}`, (`{"prompt":"` + long)[:maxShowJSON-len("…")] + "…"},
		{"Bash", `{"description":"no command"}`, `{"description":"no command"}`},
	} {
		if got := Show(tc.tool, json.RawMessage(tc.input)); got != tc.want {
			t.Errorf("Show(%s, %s) = %q, want %q", tc.tool, tc.input, got, tc.want)
		}
	}
	if got := Show("Bash", json.RawMessage(`{"command":"`+strings.Repeat("é", maxShow)+`"}`)); len(got) > maxShow || !strings.HasSuffix(got, "…") {
		t.Errorf("a long command is %d bytes", len(got))
	}
}
