package orchestrator

import (
	"testing"

	"github.com/parley-chat/parley/core"
)

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
		{message{Author: core.RoleUser, Mime: core.MimeControl, Content: "agent codex"}, kindSwitch},
		{message{Author: core.RoleUser, Mime: core.MimeControl, Content: "agent"}, kindSkip},
		{message{Author: core.RoleUser, Mime: core.MimeControl, Content: "agents codex"}, kindSkip},
		{message{Author: core.RoleSystem, Mime: core.MimeControl, Content: "close"}, kindSkip},
		{message{Author: core.RoleAssistant, Mime: core.MimeMarkdown, Content: "hi"}, kindSkip},
		{message{Author: core.RoleAssistant, Mime: core.MimeQuestion, Content: "ok?"}, kindSkip},
	} {
		if got := classify(tc.m); got != tc.want {
			t.Errorf("classify(%+v) = %d, want %d", tc.m, got, tc.want)
		}
	}
}

func TestSwitchedTo(t *testing.T) {
	for content, want := range map[string]string{"agent codex": "codex", "agent default": "", " agent  my_agent ": "my_agent"} {
		if got := switchedTo(message{Content: content}); got != want {
			t.Errorf("switchedTo(%q) = %q, want %q", content, got, want)
		}
	}
}
