package chatcmd_test

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

func TestParse(t *testing.T) {
	telegram := chatcmd.Parser{Prefix: "/", Bot: "parley_bot"}
	matrix := chatcmd.Parser{Prefix: "!"}
	slack := chatcmd.Parser{Prefix: "/parley "}
	tests := []struct {
		parser  chatcmd.Parser
		text    string
		name    string
		arg     string
		ok      bool
		wantErr string
	}{
		// Telegram: "/" with @bot addressing, as before the move.
		{parser: telegram, text: "hello", ok: false},
		{parser: telegram, text: "", ok: false},
		{parser: telegram, text: "/", ok: false},
		{parser: telegram, text: "/ new", ok: false},
		{parser: telegram, text: "/new", name: "new", ok: true},
		{parser: telegram, text: "/new  Fix the build ", name: "new", arg: "Fix the build", ok: true},
		{parser: telegram, text: "  /cancel", name: "cancel", ok: true},
		{parser: telegram, text: "/stop", name: "cancel", ok: true},
		{parser: telegram, text: "/CANCEL@parley_bot", name: "cancel", ok: true},
		{parser: telegram, text: "/cancel@Parley_Bot", name: "cancel", ok: true},
		{parser: telegram, text: "/cancel@other_bot", ok: false},
		{parser: telegram, text: "/title\tNew name\nsecond line", name: "title", arg: "New name\nsecond line", ok: true},
		{parser: telegram, text: "/title", ok: true, wantErr: "usage: /title NEW TITLE"},
		{parser: telegram, text: "/close now", ok: true, wantErr: "/close takes no argument"},
		{parser: telegram, text: "/frobnicate", ok: true, wantErr: "unknown command /frobnicate; send /help for the list"},
		{parser: telegram, text: "/title \xff", ok: true, wantErr: "/title: the text is not valid UTF-8"},
		{parser: telegram, text: "/usr/bin/env is a path", ok: false},
		{parser: telegram, text: "/" + strings.Repeat("a", 40), ok: false},
		{parser: telegram, text: "!new", ok: false},
		// Matrix: "!", no bot to address.
		{parser: matrix, text: "!new Release plan", name: "new", arg: "Release plan", ok: true},
		{parser: matrix, text: "!rename", ok: true, wantErr: "usage: !title NEW TITLE"},
		{parser: matrix, text: "!nope", ok: true, wantErr: "send !help for the list"},
		{parser: matrix, text: "!cancel@someone", ok: false},
		{parser: matrix, text: "/new", ok: false},
		{parser: matrix, text: "!!!", ok: false},
		// Slack: a prefix that ends in a space, matched regardless of case.
		{parser: slack, text: "/parley new Release plan", name: "new", arg: "Release plan", ok: true},
		{parser: slack, text: "/Parley   status", name: "status", ok: true},
		{parser: slack, text: "/parley\nhelp", name: "help", ok: true},
		{parser: slack, text: "/parleynew", ok: false},
		{parser: slack, text: "/parley", ok: false},
		{parser: slack, text: "/parley ", ok: false},
		{parser: slack, text: "/new", ok: false},
		{parser: slack, text: "/parley title", ok: true, wantErr: "usage: /parley title NEW TITLE"},
		{parser: slack, text: "/parley what", ok: true, wantErr: "unknown command /parley what; send /parley help for the list"},
		// No prefix, nothing is a command.
		{parser: chatcmd.Parser{}, text: "/new", ok: false},
		{parser: chatcmd.Parser{Prefix: "  "}, text: "  new", ok: false},
	}
	for _, tt := range tests {
		t.Run(tt.parser.Prefix+"|"+tt.text, func(t *testing.T) {
			p, ok, err := tt.parser.Parse(tt.text)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if tt.wantErr != "" {
				msg, isUser := delivery.UserMessage(err)
				if !isUser || !strings.Contains(msg, tt.wantErr) || !errors.Is(err, core.ErrInvalid) {
					t.Fatalf("err = %v (for people: %q), want a user error saying %q", err, msg, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error %v", err)
			}
			if ok && (p.Command.Name != tt.name || p.Arg != tt.arg) {
				t.Errorf("got %s %q, want %s %q", p.Command.Name, p.Arg, tt.name, tt.arg)
			}
		})
	}
}

func TestParsedBuild(t *testing.T) {
	base := core.Command{Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9", Text: "/title X"}
	parser := chatcmd.Parser{Prefix: "/"}
	tests := []struct {
		text   string
		want   core.Command
		wantOK bool
	}{
		{"/title Release plan", core.Command{Kind: core.Rename, Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9", Title: "Release plan"}, true},
		{"/new", core.Command{Kind: core.CreateSession, Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9"}, true},
		{"/new --agent codex Fix the build", core.Command{Kind: core.CreateSession, Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9",
			Title: "Fix the build", Agent: "codex"}, true},
		{"/agent codex", core.Command{Kind: core.SetAgent, Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9", Agent: "codex"}, true},
		{"/agent", core.Command{Kind: core.SetAgent, Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9"}, true},
		{"/stop", core.Command{Kind: core.Cancel, Origin: "telegram", Actor: core.Actor{ID: "1"}, PlatformID: "9"}, true},
		{"/status", core.Command{}, false},
		{"/help", core.Command{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			p, ok, err := parser.Parse(tt.text)
			if !ok || err != nil {
				t.Fatalf("Parse: %v, %v", ok, err)
			}
			cmd, ok := p.Build(base)
			if ok != tt.wantOK || cmd.Kind != tt.want.Kind || cmd.Title != tt.want.Title || cmd.Agent != tt.want.Agent || cmd.Text != "" ||
				(ok && (cmd.PlatformID != "9" || cmd.Actor != tt.want.Actor || cmd.Origin != tt.want.Origin)) {
				t.Errorf("Build = %+v, %v; want %+v, %v", cmd, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestHelpAndUsage(t *testing.T) {
	tests := []struct {
		parser chatcmd.Parser
		lines  []string
		usage  map[string]string
	}{
		{
			parser: chatcmd.Parser{Prefix: "/", Bot: "parley_bot"},
			lines: []string{
				"/new [--agent NAME] [title] — start a new session (with the agent NAME)",
				"/cancel — ask the agent to stop its turn",
				"/close — close this session",
				"/title NEW TITLE — rename this session",
				"/agent [NAME] — list the agents, or switch this session to the agent NAME",
				"/status — show the session's status",
				"/help — list the commands",
			},
			usage: map[string]string{"new": "/new [--agent NAME] [title]", "rename": "/title NEW TITLE", "stop": "/cancel", "nope": "/nope"},
		},
		{
			parser: chatcmd.Parser{Prefix: "/parley\t"},
			lines:  []string{"/parley new [--agent NAME] [title] — start a new session (with the agent NAME)"},
			usage:  map[string]string{"help": "/parley help"},
		},
		{
			parser: chatcmd.Parser{Prefix: "!", Commands: []chatcmd.Command{{Name: "ping", Help: "answer pong"}}},
			lines:  []string{"!ping — answer pong"},
			usage:  map[string]string{"ping": "!ping", "new": "!new"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.parser.Prefix, func(t *testing.T) {
			help := tt.parser.Help()
			for _, line := range tt.lines {
				if !strings.Contains(help, line+"\n") {
					t.Errorf("help has no line %q:\n%s", line, help)
				}
			}
			if n := strings.Count(help, "\n"); n != len(tt.parser.Table()) {
				t.Errorf("help has %d lines for %d commands", n, len(tt.parser.Table()))
			}
			for name, want := range tt.usage {
				if got := tt.parser.Usage(name); got != want {
					t.Errorf("Usage(%q) = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestCustomTable(t *testing.T) {
	// A platform without private chats might offer no /new; the rest works.
	var table []chatcmd.Command
	for _, c := range chatcmd.Standard() {
		if c.Name != "new" {
			table = append(table, c)
		}
	}
	p := chatcmd.Parser{Prefix: "!", Commands: table}
	if _, ok, err := p.Parse("!new x"); !ok || err == nil {
		t.Errorf("!new with new dropped: ok %v, err %v; want unknown command", ok, err)
	}
	if got, ok, err := p.Parse("!close"); !ok || err != nil || got.Command.Kind != core.Close {
		t.Errorf("!close: %+v, %v, %v", got, ok, err)
	}
	// Standard hands out copies: changing one changes no parser.
	std := chatcmd.Standard()
	std[0].Name, std[1].Aliases[0] = "changed", "changed"
	if got, ok, _ := (chatcmd.Parser{Prefix: "/"}).Parse("/stop"); !ok || got.Command.Name != "cancel" {
		t.Errorf("the standard table changed: %+v", got)
	}
}

// FuzzParse checks that no input crashes the parser, that only text
// starting with the prefix is taken for a command, and that what it accepts
// is a known command with a valid-UTF-8, trimmed argument.
func FuzzParse(f *testing.F) {
	prefixes := []string{"/", "!", "/parley "}
	for _, s := range []string{"/new title", "/cancel@bot", "/title\n\nx", "hi", "/ÿ", "/title \xff", "  /help", "!new x", "/parley  new x", "/PARLEY title"} {
		for i := range prefixes {
			f.Add(s, "bot", uint8(i))
		}
	}
	f.Fuzz(func(t *testing.T, text, bot string, which uint8) {
		prefix := prefixes[int(which)%len(prefixes)]
		p, ok, err := chatcmd.Parser{Prefix: prefix, Bot: bot}.Parse(text)
		if !ok {
			if err != nil {
				t.Fatalf("not a command but an error: %v", err)
			}
			return
		}
		lead := strings.TrimLeftFunc(text, unicode.IsSpace)
		word := strings.TrimSpace(prefix)
		if len(lead) < len(word) || !strings.EqualFold(lead[:len(word)], word) {
			t.Fatalf("%q taken for a command with prefix %q", text, prefix)
		}
		if err != nil {
			if _, isUser := delivery.UserMessage(err); !isUser {
				t.Fatalf("error without words for people: %v", err)
			}
			return
		}
		if p.Command.Name == "" {
			t.Fatalf("accepted without a command: %+v", p)
		}
		if !utf8.ValidString(p.Arg) || p.Arg != strings.TrimSpace(p.Arg) {
			t.Fatalf("argument %q not clean", p.Arg)
		}
		if p.Command.ArgRequired && p.Arg == "" {
			t.Fatalf("missing argument accepted")
		}
		if p.Command.Args == "" && p.Arg != "" {
			t.Fatalf("argument %q accepted for /%s", p.Arg, p.Command.Name)
		}
	})
}

// /new's agent comes first, as a flag, so that the title may be anything.
func TestParseNew(t *testing.T) {
	for _, tc := range []struct {
		arg, title, agent string
	}{
		{"", "", ""},
		{"Fix the build", "Fix the build", ""},
		{"--agent codex Fix the build", "Fix the build", "codex"},
		{"--agent=codex  Fix the build ", "Fix the build", "codex"},
		{"—agent codex", "", "codex"},
		{"--agent\tcodex\nFix\nthe build", "Fix\nthe build", "codex"},
		{"--agents are great", "--agents are great", ""},
		{"Fix --agent codex", "Fix --agent codex", ""},
	} {
		title, agent, err := chatcmd.ParseNew(tc.arg)
		if err != nil || title != tc.title || agent != tc.agent {
			t.Errorf("ParseNew(%q) = %q, %q, %v; want %q, %q", tc.arg, title, agent, err, tc.title, tc.agent)
		}
	}
	for _, arg := range []string{"--agent", "--agent ", "--agent= title"} {
		if _, _, err := chatcmd.ParseNew(arg); !errors.Is(err, core.ErrInvalid) {
			t.Errorf("ParseNew(%q): %v, want a refusal", arg, err)
		}
	}
}
