package slack

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackutilsx"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Slack's limits on what one message carries.
const (
	// maxText is the longest text field Slack takes (40,000 characters).
	maxText = 40000
	// maxFallback bounds the plain text sent with blocks: it is what
	// notifications and screen readers show, not the message.
	maxFallback = 3000
	// maxContext is the longest mrkdwn text of a context element.
	maxContext = 3000
	// maxButtonLabel is a button's longest text, maxButtons the most
	// elements of one actions block.
	maxButtonLabel = 75
	maxButtons     = 25
	// maxTitle bounds the title shown in a root or header message.
	maxTitle = 200
	// answerPrefix starts the action_id of a question's buttons; the
	// value is core's ButtonData.
	answerPrefix = "parley_answer_"
)

// payload is the content of one chat.postMessage or chat.update: blocks
// and the plain text Slack shows where blocks cannot be (notifications).
type payload struct {
	Text   string        `json:"text"`
	Blocks []slack.Block `json:"blocks,omitempty"`
}

// render is how m is shown: the agent's markdown in a markdown block
// (Slack renders standard markdown there), a notice as small grey text
// (a context block, in mrkdwn) when it is short enough, buttons as actions
// blocks, and a plain-text fallback.
func render(m core.OutMessage) payload {
	p := payload{Text: fallbackText(m)}
	if strings.TrimSpace(m.Text) != "" || len(m.Buttons) == 0 {
		p.Blocks = append(p.Blocks, textBlock(m))
	}
	p.Blocks = append(p.Blocks, buttonBlocks(m.Buttons)...)
	return p
}

// textBlock shows m's text.
func textBlock(m core.OutMessage) slack.Block {
	if m.Kind == core.KindNotice {
		if mrkdwn := markdown.Render(m.Text, markdown.Slack); mrkdwn != "" && len(mrkdwn) <= maxContext {
			return slack.NewContextBlock("", slack.NewTextBlockObject(slack.MarkdownType, mrkdwn, false, false))
		}
	}
	md := m.Text
	if strings.TrimSpace(md) == "" {
		md = "…" // Slack refuses empty blocks
	}
	return slack.NewMarkdownBlock("", shorten(md, maxMarkdown))
}

// buttonBlocks are a question's options, in actions blocks of at most 25
// buttons. The action ids are unique within the message; the value is
// core's ButtonData, which the click brings back.
func buttonBlocks(bs []core.Button) []slack.Block {
	var out []slack.Block
	for start := 0; start < len(bs); start += maxButtons {
		var els []slack.BlockElement
		for i := start; i < min(start+maxButtons, len(bs)); i++ {
			label := shortenRunes(strings.TrimSpace(bs[i].Label), maxButtonLabel)
			if label == "" {
				label = strconv.Itoa(i + 1)
			}
			els = append(els, slack.NewButtonBlockElement(answerPrefix+strconv.Itoa(i), bs[i].Data,
				slack.NewTextBlockObject(slack.PlainTextType, label, true, false)))
		}
		out = append(out, slack.NewActionBlock("", els...))
	}
	return out
}

// fallbackText is the plain text sent with m's blocks, escaped for Slack.
func fallbackText(m core.OutMessage) string {
	text := strings.TrimSpace(markdown.Render(m.Text, markdown.Plain))
	if text == "" {
		var labels []string
		for _, b := range m.Buttons {
			labels = append(labels, b.Label)
		}
		text = strings.Join(labels, " / ")
	}
	if text == "" {
		text = "…"
	}
	return escapeText(shorten(text, maxFallback))
}

// renderText is m without blocks, for a second try after Slack refused
// the blocks or their length (invalid_blocks, msg_too_long): the markdown
// in Slack's own mrkdwn, and a question's options as a numbered list to
// answer by number (the handler takes "2" as the second option).
func renderText(m core.OutMessage) payload {
	return payload{Text: shorten(mrkdwnText(m), maxText)}
}

// mrkdwnText is renderText's text, whatever its length.
func mrkdwnText(m core.OutMessage) string {
	text := markdown.Render(m.Text, markdown.Slack)
	if len(m.Buttons) > 0 {
		var b strings.Builder
		b.WriteString(text)
		for i, btn := range m.Buttons {
			b.WriteString("\n" + strconv.Itoa(i+1) + ". " + escapeText(btn.Label))
		}
		b.WriteString("\n\n_Reply with the number of your choice._")
		text = b.String()
	}
	if strings.TrimSpace(text) == "" {
		text = "…"
	}
	return text
}

// options are the slack-go options that send p. An update without blocks
// clears the blocks the message had.
func (p payload) options(update bool) []slack.MsgOption {
	opts := []slack.MsgOption{slack.MsgOptionText(p.Text, false), slack.MsgOptionDisableLinkUnfurl(), slack.MsgOptionDisableMediaUnfurl()}
	if len(p.Blocks) > 0 || update {
		opts = append(opts, slack.MsgOptionBlocks(p.Blocks...))
	}
	return opts
}

// escapeText escapes &, < and >, which Slack reads as markup in text.
func escapeText(s string) string { return slackutilsx.EscapeMessage(s) }

// rootText is what a root message parley owns shows of its session: the
// status emoji and the title.
func rootText(v core.StatusView) string { return delivery.StatusMark(v.Status) + " " + bold(v.Title) }

// headerText is the reply that shows a session's new title in a thread
// whose root a person wrote.
func headerText(title string) string { return "🏷 " + bold(title) }

// bold is title in mrkdwn bold, fitted and escaped; a title holding an
// asterisk is left plain, which mrkdwn cannot escape.
func bold(title string) string {
	title = escapeText(shorten(strings.Join(strings.Fields(title), " "), maxTitle))
	if title == "" {
		return ""
	}
	if strings.Contains(title, "*") {
		return title
	}
	return "*" + title + "*"
}

// reactions are the emoji names that show a status on a root a person
// wrote, after core's status emoji.
var reactions = map[core.Status]string{
	core.StatusIdle:    "speech_balloon",
	core.StatusWorking: "hourglass_flowing_sand",
	core.StatusWaiting: "question",
	core.StatusClosed:  "white_check_mark",
}

func reactionFor(s core.Status) string {
	if r, ok := reactions[s]; ok {
		return r
	}
	return reactions[core.StatusIdle]
}

// shorten cuts s to at most n bytes at a character boundary, marking the
// cut with "…".
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// shortenRunes cuts s to at most n characters, marking the cut with "…".
func shortenRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
