package orchestrator

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestToolCmd(t *testing.T) {
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
		{"Task", `{"prompt":"` + long + `"}`, (`{"prompt":"` + long)[:maxArgs-len("…")] + "…"},
		{"Bash", `{"description":"no command"}`, `{"description":"no command"}`},
	} {
		if got := toolCmd(tc.tool, json.RawMessage(tc.input)); got != tc.want {
			t.Errorf("toolCmd(%s, %s) = %q, want %q", tc.tool, tc.input, got, tc.want)
		}
	}
	if got := toolCmd("Bash", json.RawMessage(`{"command":"`+strings.Repeat("é", core.MaxToolCmd)+`"}`)); len(got) > core.MaxToolCmd || !strings.HasSuffix(got, "…") {
		t.Errorf("a long command is %d bytes", len(got))
	}
}

func TestPrompt(t *testing.T) {
	one := []message{{Content: "hello", Actor: "Ann"}, {Content: "and more", Actor: "Ann"}}
	if got := prompt(one); got != "hello\n\nand more" {
		t.Errorf("one author: %q", got)
	}
	two := []message{{Content: "hello", Actor: "Ann"}, {Content: "hi\nthere", Actor: "Bob"}}
	if got := prompt(two); got != "Ann: hello\n\nBob: hi\nthere" {
		t.Errorf("two authors: %q", got)
	}
	file := []message{{Content: "see this", Actor: "Ann", Attachments: []core.Attachment{{Name: "a.pdf", Path: "/data/files/a.pdf"}}},
		{Actor: "Ann", Attachments: []core.Attachment{{Name: "b.png", Path: "/data/files/b.png"}}}}
	if got := prompt(file); got != "see this\n[attached file a.pdf at /data/files/a.pdf]\n\n[attached file b.png at /data/files/b.png]" {
		t.Errorf("attachments: %q", got)
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		m    message
		want kind
	}{
		{message{Author: core.RoleUser, Mime: core.MimeMarkdown, Content: "Approve"}, kindTurn},
		{message{Author: core.RoleUser, Mime: "text/plain", Content: "Deny and continue"}, kindSkip},
		{message{Author: core.RoleUser, Mime: core.MimeAnswer, Content: "any answer"}, kindSkip},
		{message{Author: core.RoleUser, Mime: "text/plain", Content: "a plain note"}, kindTurn},
		{message{Author: core.RoleUser, Mime: core.MimeControl, Content: "cancel"}, kindCancel},
		{message{Author: core.RoleUser, Mime: core.MimeControl, Content: "close"}, kindClose},
		{message{Author: core.RoleSystem, Mime: core.MimeControl, Content: "close"}, kindSkip},
		{message{Author: core.RoleAssistant, Mime: core.MimeMarkdown, Content: "hi"}, kindSkip},
		{message{Author: core.RoleAssistant, Mime: core.MimeQuestion, Content: "ok?"}, kindSkip},
	} {
		if got := classify(tc.m); got != tc.want {
			t.Errorf("classify(%+v) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestUUID(t *testing.T) {
	u := newUUID()
	if len(u) != 36 || u[14] != '4' || !strings.ContainsRune("89ab", rune(u[19])) || u == newUUID() {
		t.Fatalf("uuid %s", u)
	}
}
