package chatcmd

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// Command is one command people can type in a chat, with what it needs and
// what it does.
type Command struct {
	// Name is what people type after the prefix, in lower case.
	Name string
	// Aliases are other names for the same command, in lower case.
	Aliases []string
	// Args describes the argument for help ("" when none is taken).
	Args string
	// ArgRequired refuses the command without an argument.
	ArgRequired bool
	// Help says in a few words what the command does.
	Help string
	// Kind is the command it becomes; empty for commands the adapter
	// answers itself (status, help).
	Kind core.CommandKind
}

// standard is parley's command table; Standard hands out copies.
var standard = []Command{
	{Name: "new", Args: "[--agent NAME] [title]", Help: "start a new session (with the agent NAME)", Kind: core.CreateSession},
	{Name: "cancel", Aliases: []string{"stop"}, Help: "ask the agent to stop its turn", Kind: core.Cancel},
	{Name: "close", Help: "close this session", Kind: core.Close},
	{Name: "title", Aliases: []string{"rename"}, Args: "NEW TITLE", ArgRequired: true, Help: "rename this session", Kind: core.Rename},
	{Name: "agent", Args: "[NAME]", Help: "list the agents, or switch this session to the agent NAME", Kind: core.SetAgent},
	{Name: "status", Help: "show the session's status"},
	{Name: "help", Aliases: []string{"start"}, Help: "list the commands"},
}

// Standard returns parley's commands in the order help lists them. The
// slice is the caller's own: an adapter may drop a command it cannot offer
// or add one, and set the result as Parser.Commands.
func Standard() []Command {
	out := make([]Command, len(standard))
	for i, c := range standard {
		c.Aliases = slices.Clone(c.Aliases)
		out[i] = c
	}
	return out
}

// Parser recognises the commands typed with one adapter's prefix. It is a
// value that is only read, safe for concurrent use; the zero Parser
// recognises nothing.
type Parser struct {
	// Prefix starts a command: "/" on Telegram, "!" on Matrix, "!" or
	// "/parley " in a Slack thread. It is matched regardless of case; a
	// prefix that ends in white space needs white space (any amount)
	// before the command name. Empty means no text is a command.
	Prefix string
	// Bot is the bot's user name on platforms that address commands to a
	// bot ("/cancel@parley_bot"): a command addressed to any other name is
	// not ours.
	Bot string
	// Commands are the commands recognised, in the order help lists them;
	// nil means Standard().
	Commands []Command
}

// Parsed is a recognised command.
type Parsed struct {
	Command Command
	// Arg is the rest of the text after the command name, further lines
	// included, trimmed.
	Arg string
}

// maxName bounds what is taken for a command name; Telegram allows 32
// characters.
const maxName = 32

// Parse recognises a command at the start of text. Text that is not a
// command (no prefix, not a command name, addressed to another bot) gives
// ok false and no error. A known command used wrongly, or an unknown name,
// gives ok true and a *core.UserError wrapping core.ErrInvalid whose
// message tells the person how to use it; Parsed then holds the command
// when it was known.
func (p Parser) Parse(text string) (parsed Parsed, ok bool, err error) {
	rest, ok := p.cut(text)
	if !ok {
		return Parsed{}, false, nil
	}
	// The name ends at the first white space; everything after it,
	// further lines included, is the argument.
	word, arg := rest, ""
	if i := strings.IndexFunc(word, unicode.IsSpace); i >= 0 {
		word, arg = word[:i], word[i:]
	}
	name, addressee, addressed := strings.Cut(word, "@")
	if addressed && !strings.EqualFold(addressee, p.Bot) {
		return Parsed{}, false, nil
	}
	if name == "" || len(name) > maxName || !validName(name) {
		return Parsed{}, false, nil
	}
	name = strings.ToLower(name)
	c, known := p.lookup(name)
	if !known {
		msg := "unknown command " + p.lead() + name
		if _, ok := p.lookup("help"); ok {
			msg += "; send " + p.Usage("help") + " for the list"
		}
		return Parsed{}, true, refusal(msg)
	}
	parsed = Parsed{Command: c, Arg: strings.TrimSpace(arg)}
	switch {
	case !utf8.ValidString(parsed.Arg):
		return Parsed{}, true, refusal(p.lead() + c.Name + ": the text is not valid UTF-8")
	case c.Args == "" && parsed.Arg != "":
		return parsed, true, refusal(p.lead() + c.Name + " takes no argument")
	case c.ArgRequired && parsed.Arg == "":
		return parsed, true, refusal("usage: " + p.Usage(c.Name))
	}
	return parsed, true, nil
}

// cut returns what follows the prefix at the start of text (leading white
// space ignored), and whether text starts with it.
func (p Parser) cut(text string) (string, bool) {
	word := strings.TrimRightFunc(p.Prefix, unicode.IsSpace)
	if word == "" {
		return "", false
	}
	text = strings.TrimLeftFunc(text, unicode.IsSpace)
	if len(text) < len(word) || !strings.EqualFold(text[:len(word)], word) {
		return "", false
	}
	rest := text[len(word):]
	if len(word) < len(p.Prefix) {
		// "/parley new", not "/parleynew".
		trimmed := strings.TrimLeftFunc(rest, unicode.IsSpace)
		if len(trimmed) == len(rest) {
			return "", false
		}
		rest = trimmed
	}
	return rest, true
}

// lead is the prefix as written before a command name in help and errors:
// trailing white space becomes one space.
func (p Parser) lead() string {
	word := strings.TrimRightFunc(p.Prefix, unicode.IsSpace)
	if len(word) < len(p.Prefix) {
		return word + " "
	}
	return word
}

// Table returns the commands p recognises, in help order: Commands, or
// Standard() when that is nil. Adapters register these with platforms
// that show a command menu (Telegram's setMyCommands).
func (p Parser) Table() []Command {
	if p.Commands == nil {
		return Standard()
	}
	return p.Commands
}

// commands is Table without the copy, for reading only.
func (p Parser) commands() []Command {
	if p.Commands == nil {
		return standard
	}
	return p.Commands
}

func (p Parser) lookup(name string) (Command, bool) {
	for _, c := range p.commands() {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c, true
		}
	}
	return Command{}, false
}

func validName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

func refusal(msg string) error {
	return &core.UserError{Msg: msg, Err: fmt.Errorf("chatcmd: %s: %w", msg, core.ErrInvalid)}
}

// Build turns a parsed command into the command to handle, filling in the
// fields of base (origin, actor, place, platform ids). ok is false for
// commands the adapter answers itself (status, help).
func (p Parsed) Build(base core.Command) (cmd core.Command, ok bool) {
	if p.Command.Kind == "" {
		return core.Command{}, false
	}
	cmd = base
	cmd.Kind = p.Command.Kind
	cmd.Text = ""
	switch p.Command.Kind {
	case core.CreateSession:
		cmd.Title, cmd.Agent, _ = ParseNew(p.Arg)
	case core.Rename:
		cmd.Title = p.Arg
	case core.SetAgent:
		cmd.Agent = p.Arg
	}
	return cmd, true
}

// agentFlags are how the agent of /new is written: "--agent", and "—agent"
// as phones' keyboards turn the two dashes into one long one.
var agentFlags = []string{"--agent", "—agent"}

// ParseNew reads /new's argument: an optional "--agent NAME" (or
// "--agent=NAME") first, then the title. A flag without a name is an
// error for the person (a *core.UserError wrapping core.ErrInvalid).
func ParseNew(arg string) (title, agent string, err error) {
	arg = strings.TrimSpace(arg)
	for _, flag := range agentFlags {
		rest, ok := strings.CutPrefix(arg, flag)
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "="):
			rest = rest[1:]
		case rest == "" || unicode.IsSpace(rune(rest[0])):
			rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
		default:
			continue // "--agents", a title
		}
		name, title := rest, ""
		if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
			name, title = rest[:i], rest[i:]
		}
		if name == "" {
			return "", "", refusal("--agent needs the agent's name: --agent NAME, then the title")
		}
		return strings.TrimSpace(title), name, nil
	}
	return arg, "", nil
}

// Usage is how to type the named command (or alias) with p's prefix:
// "/title NEW TITLE", "/parley new [title]". A name p does not know is
// written bare.
func (p Parser) Usage(name string) string {
	c, ok := p.lookup(name)
	if !ok {
		return p.lead() + name
	}
	return p.usage(c)
}

func (p Parser) usage(c Command) string {
	if c.Args == "" {
		return p.lead() + c.Name
	}
	return p.lead() + c.Name + " " + c.Args
}

// Help lists the commands, one a line, with p's prefix:
//
//	/title NEW TITLE — rename this session
func (p Parser) Help() string {
	var b strings.Builder
	for _, c := range p.commands() {
		b.WriteString(p.usage(c) + " — " + c.Help + "\n")
	}
	return b.String()
}
