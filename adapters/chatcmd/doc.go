// Package chatcmd holds the commands people type into a chat — /new,
// /cancel, /close, /title, /agent, /status, /help — and the parser every adapter
// uses to recognise them, so that each platform offers the same commands
// with the same help. The name says what it holds: chat commands, typed as
// text; "slash" would be wrong on Matrix, where they start with "!".
//
// Commands are values (Command) carrying their name, aliases, argument,
// help text and the core.CommandKind they become; the package imports only
// core, so adapters share it without importing the commands package (which
// executes commands) or each other. A command that an adapter answers
// itself (status, help) has no kind.
//
// The prefix belongs to the adapter, not to the table: "/" on Telegram,
// with "/cancel@parley_bot" addressing; "!" on Matrix ("!new title"); in a
// Slack thread, where Slack's own slash commands carry no thread, a text
// prefix such as "!" or "/parley " ("/parley new title"). A prefix ending
// in white space needs white space (any amount) before the command name.
// Parser.Help and Parser.Usage write commands with the same prefix, so what
// people are told to type is what the parser takes.
//
// Decisions: command names are ASCII letters, digits and "_" (Telegram's
// rule), matched without regard to case, and at most 32 characters, so a
// path such as "/usr/bin/env" is text, not a command. Everything after the
// name, further lines included, is the argument, trimmed. A known command
// used wrongly, and an unknown name after the prefix, is an error for the
// person (a *core.UserError wrapping core.ErrInvalid) saying how to use it;
// text addressed to another bot is not a command at all. /new takes the
// agent of the session first, as a flag: "/new --agent codex Fix the
// build" (ParseNew; "—agent", as a phone writes two dashes, too), so that
// a title may be any text; /agent NAME switches, /agent alone lists.
package chatcmd
