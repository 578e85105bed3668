package commands_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

func TestParse(t *testing.T) {
	tests := []struct {
		text    string
		name    string
		arg     string
		ok      bool
		wantErr string
	}{
		{text: "hello", ok: false},
		{text: "", ok: false},
		{text: "/", ok: false},
		{text: "/new", name: "new", ok: true},
		{text: "/new  Fix the build ", name: "new", arg: "Fix the build", ok: true},
		{text: "  /cancel", name: "cancel", ok: true},
		{text: "/stop", name: "cancel", ok: true},
		{text: "/CANCEL@parley_bot", name: "cancel", ok: true},
		{text: "/cancel@other_bot", ok: false},
		{text: "/title\tNew name\nsecond line", name: "title", arg: "New name\nsecond line", ok: true},
		{text: "/title", ok: true, wantErr: "usage: /title NEW TITLE"},
		{text: "/close now", ok: true, wantErr: "/close takes no argument"},
		{text: "/frobnicate", ok: true, wantErr: "unknown command /frobnicate"},
		{text: "/usr/bin/env is a path", ok: false},
		{text: "/" + strings.Repeat("a", 40), ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			p, ok, err := commands.Parse(tt.text, "parley_bot")
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if ok && (p.Slash.Name != tt.name || p.Arg != tt.arg) {
				t.Errorf("got /%s %q, want /%s %q", p.Slash.Name, p.Arg, tt.name, tt.arg)
			}
		})
	}
}

func TestParsedCommand(t *testing.T) {
	base := core.Command{Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9", Text: "/title X"}
	p, _, _ := commands.Parse("/title Release plan", "")
	cmd, ok := p.Command(base)
	if !ok || cmd.Kind != core.Rename || cmd.Title != "Release plan" || cmd.Text != "" || cmd.PlatformID != "9" {
		t.Errorf("got %+v", cmd)
	}
	p, _, _ = commands.Parse("/status", "")
	if _, ok := p.Command(base); ok {
		t.Error("/status is answered by the adapter, not a command")
	}
	if h := commands.Help(); !strings.Contains(h, "/title NEW TITLE — rename this session") {
		t.Errorf("help: %s", h)
	}
}

// FuzzParse checks that no input crashes the parser, that only text
// starting with a slash is taken for a command, and that what it accepts is
// a known command with a valid-UTF-8, trimmed argument.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"/new title", "/cancel@bot", "/title\n\nx", "hi", "/ÿ", "/title \xff", "  /help"} {
		f.Add(s, "bot")
	}
	f.Fuzz(func(t *testing.T, text, bot string) {
		p, ok, err := commands.Parse(text, bot)
		if !ok {
			if err != nil {
				t.Fatalf("not a command but an error: %v", err)
			}
			return
		}
		if !strings.HasPrefix(strings.TrimLeftFunc(text, unicode.IsSpace), "/") {
			t.Fatalf("%q taken for a command", text)
		}
		if err != nil {
			return
		}
		if p.Slash.Name == "" {
			t.Fatalf("accepted without a command: %+v", p)
		}
		if !utf8.ValidString(p.Arg) || p.Arg != strings.TrimSpace(p.Arg) {
			t.Fatalf("argument %q not clean", p.Arg)
		}
		if p.Slash.ArgRequired && p.Arg == "" {
			t.Fatalf("missing argument accepted")
		}
	})
}
