package orchestrator

import (
	"strings"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	parleymcp "github.com/parley-chat/parley/mcp"
)

// message is an inbox message as chat_read_since gives it.
type message = parleymcp.InboxMessage

// kind of an inbox message, for the orchestrator.
type kind int

const (
	kindSkip   kind = iota // the agent side's own, or no turn (an answer)
	kindTurn               // a person's message: part of a turn
	kindCancel             // the person's /cancel
	kindClose              // the person's /close
	kindSwitch             // the person's /agent NAME
)

func classify(m message) kind {
	if m.Author != core.RoleUser {
		return kindSkip
	}
	if m.Mime == core.MimeControl {
		switch strings.TrimSpace(m.Content) {
		case "cancel":
			return kindCancel
		case "close":
			return kindClose
		}
		if f := strings.Fields(m.Content); len(f) == 2 && f[0] == core.ControlAgent {
			return kindSwitch
		}
		return kindSkip
	}
	// ui.request_approval returned the answer already: no turn.
	if m.Mime == core.MimeAnswer {
		return kindSkip
	}
	// Before core.MimeAnswer, an answer was stored as text/plain holding the
	// chosen option; the orchestrator asks approvals only, so such an
	// answer is a decision. People's own messages are markdown.
	if m.Mime == "text/plain" {
		if _, ok := delivery.DecisionOf(delivery.ApprovalOptionsFor(false), m.Content); ok {
			return kindSkip
		}
	}
	return kindTurn
}

// switchedTo is the name of the agent a /agent control message switched
// to, "" for the default.
func switchedTo(m message) string {
	name := strings.Fields(m.Content)[1]
	if name == core.DefaultAgent {
		return ""
	}
	return name
}

// prompt is the text of a turn made of msgs, oldest first: their contents
// separated by a blank line, each prefixed by its author's name when
// several people wrote, attachments named by their path.
func prompt(msgs []message) string {
	authors := map[string]bool{}
	for _, m := range msgs {
		authors[author(m)] = true
	}
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		if len(authors) > 1 {
			b.WriteString(author(m) + ": ")
		}
		b.WriteString(m.Content)
		for j, a := range m.Attachments {
			if j > 0 || m.Content != "" {
				b.WriteString("\n")
			}
			b.WriteString("[attached file " + a.Name)
			if a.Path != "" {
				b.WriteString(" at " + a.Path)
			}
			b.WriteString("]")
		}
	}
	return b.String()
}

func author(m message) string {
	switch {
	case m.Actor != "":
		return m.Actor
	case m.Origin != "":
		return string(m.Origin)
	}
	return "someone"
}

// tail keeps the last n bytes of s, on a rune boundary.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := len(s) - n
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return s[i:]
}
