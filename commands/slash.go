package commands

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// Slash is one slash command people can type on a platform, with what it
// needs and what it does. Adapters register Slashes with the platform
// (Telegram's setMyCommands, Slack's command list) and parse input with
// Parse, so every platform offers the same commands with the same help.
type Slash struct {
	Name    string
	Aliases []string
	// Args describes the argument for help ("" when none is taken).
	Args string
	// ArgRequired refuses the command without an argument.
	ArgRequired bool
	Help        string
	// Kind is the command it becomes; empty for commands the adapter
	// answers itself (status, help).
	Kind core.CommandKind
}

// Slashes are the commands, in the order help lists them.
var Slashes = []Slash{
	{Name: "new", Args: "[title]", Help: "start a new session", Kind: core.CreateSession},
	{Name: "cancel", Aliases: []string{"stop"}, Help: "ask the agent to stop its turn", Kind: core.Cancel},
	{Name: "close", Help: "close this session", Kind: core.Close},
	{Name: "title", Aliases: []string{"rename"}, Args: "NEW TITLE", ArgRequired: true, Help: "rename this session", Kind: core.Rename},
	{Name: "status", Help: "show the session's status"},
	{Name: "help", Aliases: []string{"start"}, Help: "list the commands"},
}

// Parsed is a recognised slash command.
type Parsed struct {
	Slash Slash
	// Arg is the rest of the line after the command, trimmed.
	Arg string
}

// maxCommandName bounds what is taken for a command name; Telegram allows
// 32 characters.
const maxCommandName = 32

// Parse recognises a slash command at the start of text. bot is the bot's
// username on platforms that address commands ("/cancel@parley_bot"); a
// command addressed to another bot is not ours (ok false). Text that is not
// a slash command gives ok false; a known command used wrongly gives an
// error that says how to use it, for the person.
func Parse(text, bot string) (p Parsed, ok bool, err error) {
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if !strings.HasPrefix(text, "/") {
		return Parsed{}, false, nil
	}
	// The name ends at the first white space; everything after it,
	// further lines included, is the argument.
	word, arg := text[1:], ""
	if i := strings.IndexFunc(word, unicode.IsSpace); i >= 0 {
		word, arg = word[:i], word[i:]
	}
	name, addressee, addressed := strings.Cut(word, "@")
	if addressed && !strings.EqualFold(addressee, bot) {
		return Parsed{}, false, nil
	}
	if name == "" || len(name) > maxCommandName || !validName(name) {
		return Parsed{}, false, nil
	}
	name = strings.ToLower(name)
	for _, s := range Slashes {
		if s.Name != name && !contains(s.Aliases, name) {
			continue
		}
		p := Parsed{Slash: s, Arg: strings.TrimSpace(arg)}
		if !utf8.ValidString(p.Arg) {
			return Parsed{}, true, fmt.Errorf("/%s: the text is not valid UTF-8", s.Name)
		}
		if s.Args == "" && p.Arg != "" {
			return p, true, fmt.Errorf("/%s takes no argument", s.Name)
		}
		if s.ArgRequired && p.Arg == "" {
			return p, true, fmt.Errorf("usage: /%s %s", s.Name, s.Args)
		}
		return p, true, nil
	}
	return Parsed{}, true, fmt.Errorf("unknown command /%s; send /help for the list", name)
}

func validName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Command turns a parsed slash command into the command to handle, filling
// in the fields of base (origin, actor, place, platform ids). ok is false
// for commands the adapter answers itself (status, help).
func (p Parsed) Command(base core.Command) (core.Command, bool) {
	if p.Slash.Kind == "" {
		return core.Command{}, false
	}
	cmd := base
	cmd.Kind = p.Slash.Kind
	cmd.Text = ""
	switch p.Slash.Kind {
	case core.CreateSession, core.Rename:
		cmd.Title = p.Arg
	}
	return cmd, true
}

// Help is the list of commands for /help.
func Help() string {
	var b strings.Builder
	for _, s := range Slashes {
		b.WriteString("/" + s.Name)
		if s.Args != "" {
			b.WriteString(" " + s.Args)
		}
		b.WriteString(" — " + s.Help + "\n")
	}
	return b.String()
}
