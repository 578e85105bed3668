package orchestrator

import (
	"bytes"
	"encoding/json"
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
		if _, ok := delivery.DecisionOf(m.Content); ok {
			return kindSkip
		}
	}
	return kindTurn
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

// toolArg names the argument people should read for Claude Code's tools.
var toolArg = map[string]string{
	"Bash": "command", "Read": "file_path", "Write": "file_path", "Edit": "file_path", "MultiEdit": "file_path",
	"NotebookEdit": "notebook_path", "Grep": "pattern", "Glob": "pattern", "WebFetch": "url", "WebSearch": "query",
}

// maxArgs bounds the compact JSON shown for other tools.
const maxArgs = 200

// toolCmd is what people should read of a call of tool with input: the
// command, the file, the pattern or the URL, else the arguments as compact
// JSON of at most maxArgs bytes.
func toolCmd(tool string, input json.RawMessage) string {
	var args map[string]any
	_ = json.Unmarshal(input, &args)
	if k, ok := toolArg[tool]; ok {
		if s, ok := args[k].(string); ok && s != "" {
			return truncate(s, core.MaxToolCmd)
		}
	}
	var b bytes.Buffer
	if err := json.Compact(&b, input); err != nil || b.Len() == 0 {
		return ""
	}
	return truncate(b.String(), maxArgs)
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
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
