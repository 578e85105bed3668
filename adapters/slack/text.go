package slack

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Slack sends what people type as its own markup: &, < and > escaped, and
// links, mentions and channel references in angle brackets. fromSlack turns
// it into the markdown agents read.

// angle is one <…> reference in Slack's text.
var angle = regexp.MustCompile(`<([^<>]*)>`)

// fromSlack converts a message's text to markdown: <url|label> becomes
// [label](url), <url> the URL, <@U123> "@U123" (or the name names gives),
// <#C123|general> "#general", <!here> "@here"; the escapes are undone
// last. A leading mention of the bot itself (botUser) is dropped: "@parley
// fix the tests" is addressed to the agent.
func fromSlack(text, botUser string, names func(id string) string) string {
	if botUser != "" {
		if rest, ok := strings.CutPrefix(strings.TrimLeft(text, " "), "<@"+botUser+">"); ok {
			text = strings.TrimLeft(rest, " :,")
		}
	}
	out := angle.ReplaceAllStringFunc(text, func(m string) string {
		inner := m[1 : len(m)-1]
		target, label, hasLabel := strings.Cut(inner, "|")
		switch {
		case strings.HasPrefix(target, "@"):
			if hasLabel && label != "" {
				return "@" + label
			}
			if names != nil {
				if name := names(target[1:]); name != "" {
					return "@" + name
				}
			}
			return target
		case strings.HasPrefix(target, "#"):
			if hasLabel && label != "" {
				return "#" + label
			}
			return target
		case strings.HasPrefix(target, "!"):
			special, _, _ := strings.Cut(target[1:], "^")
			if hasLabel && label != "" {
				return label
			}
			return "@" + special
		case hasLabel && label != "" && label != target:
			return "[" + label + "](" + target + ")"
		}
		return target
	})
	return unescape(out)
}

var unescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")

func unescape(s string) string { return unescaper.Replace(s) }

// titleOf is a session title taken from the first line of a message.
func titleOf(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	line = strings.Join(strings.Fields(line), " ")
	const max = 60
	if utf8.RuneCountInString(line) <= max {
		return line
	}
	return shortenRunes(line, max)
}
