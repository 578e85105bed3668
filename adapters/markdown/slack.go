package markdown

import (
	"strings"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// Slack is Slack's mrkdwn, for a message's text and mrkdwn text objects:
// *bold*, _italic_, ~strike~, `code`, ``` blocks (without a language,
// which mrkdwn cannot show), <url|text> links for http, https and mailto,
// and &, < and > escaped as &amp; &lt; &gt; everywhere. Formatting does not
// span lines in Slack, so it is closed before a line break and reopened
// after; a link's text takes no formatting of its own, but formatting
// around the whole link stays. Headings become bold lines, quotes "> "
// lines (a quote in a quote joins the outer one), lists "• item" and
// "1. item" lines with continuation lines indented, tables aligned
// monospace text in a ``` block, rules "———", raw HTML its own source,
// escaped.
//
// Slack has no escape for its formatting characters: text that happens to
// hold *, _ or ~ around a word may still be formatted by Slack, and
// formatting that ends inside a word (**a**b) may show its markers
// instead. Backticks
// are kept from opening code or a code block where the markdown has none:
// each one in text is followed by a zero-width space (U+200B), and in a
// code block holding ``` each pair of them. Inline code holding a backtick
// cannot be shown as code and is shown as text.
//
// Length counts the bytes of the mrkdwn text, markup and escapes included;
// the account counts runes of the text, markers included but escapes,
// zero-width spaces and links' URLs not.
var Slack Dialect = slack{}

type slack struct{}

func (slack) Name() string { return "slack" }

func (slack) Rules() Rules {
	return Rules{Markup: true, HeadingBold: true, LineFormatting: true, PlainLinkText: true}
}

func (slack) Unit() core.LengthUnit             { return core.Runes }
func (slack) Visible(out string) int            { return slackVisible(out) }
func (slack) Length(_, out string) int          { return len(out) }
func (slack) Escape(s string) string            { return slackText(s) }
func (slack) Literal(src string) string         { return slackText(src) }
func (slack) Break() string                     { return "\n" }
func (slack) Paragraph(s string, _ bool) string { return s }
func (slack) Heading(_ int, s string) string    { return s }
func (slack) Rule() string                      { return "———" }
func (slack) CodeBlock(_, code string) string   { return slackFence(code) }
func (slack) Table(t Table) string              { return slackFence(t.Text) }

func (slack) AcceptLink(href string) bool {
	lower := strings.ToLower(href)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return webLink(href)
	case strings.HasPrefix(lower, "mailto:"):
		return len(href) > len("mailto:")
	}
	return false
}

// Tags writes links as <url|text>. The URL comes percent-encoded, so it
// holds no '|', '<' or '>'; '&' is escaped as everywhere.
func (slack) Tags(f Format, href string) (string, string) {
	switch f {
	case Bold:
		return "*", "*"
	case Italic:
		return "_", "_"
	case Strike:
		return "~", "~"
	case Link:
		return "<" + escapeText(href) + "|", ">"
	}
	return "", ""
}

func (slack) Code(s string) (string, bool) {
	if strings.Contains(s, "`") {
		return "", false
	}
	return "`" + escapeText(s) + "`", true
}

// Quote marks each line with "> ". Slack cannot nest quotes: a nested one
// is left for the outer quote to mark.
func (slack) Quote(s string, nested, compact bool) string {
	if nested || compact {
		return s
	}
	return prefixLines(s, "> ")
}

// slackText escapes text, a zero-width space after each backtick so that
// none can open or close code with a neighbour.
func slackText(s string) string {
	return escapeText(strings.ReplaceAll(s, "`", "`\u200b"))
}

// List lays a list out as lines. An item starting with a code block or a
// quote starts it on the next line: their markers must start a line.
func (slack) List(l List) string {
	items := make([]Item, len(l.Items))
	for i, it := range l.Items {
		if strings.HasPrefix(it.Content, "```") || strings.HasPrefix(it.Content, ">") {
			it.Marker = strings.TrimSuffix(it.Marker, " ")
			it.Content = "\n" + it.Content
		}
		items[i] = it
	}
	l.Items = items
	return textList(l, slackIndent)
}

// slackFence puts code in a ``` block on lines of its own.
func slackFence(code string) string {
	if strings.Contains(code, "```") {
		code = strings.ReplaceAll(code, "``", "`\u200b`")
	}
	return "```\n" + escapeText(code) + "\n```"
}

// slackIndent indents a list item's continuation lines, except those of
// ``` blocks, whose text would change, and of quotes, whose marker must
// start the line.
func slackIndent(s, ind string) string {
	inCode := false
	return indentLines(s, ind, func(line string) bool {
		if line == "```" {
			inCode = !inCode
			return true
		}
		return inCode || strings.HasPrefix(line, ">")
	})
}

// slackVisible counts the runes of mrkdwn's text: &amp; &lt; &gt; as one,
// a <url|text> link as its text, a <url> as its URL, markers as written,
// zero-width spaces not at all.
func slackVisible(s string) int {
	n := 0
	for i := 0; i < len(s); {
		switch s[i] {
		case '&':
			if k := slackEntity(s[i:]); k > 0 {
				n++
				i += k
				continue
			}
		case '<':
			if j := strings.IndexByte(s[i:], '>'); j > 0 {
				inner := s[i+1 : i+j]
				if k := strings.IndexByte(inner, '|'); k >= 0 {
					inner = inner[k+1:]
				}
				n += slackVisible(inner)
				i += j + 1
				continue
			}
		}
		r, k := utf8.DecodeRuneInString(s[i:])
		if r != '\u200b' {
			n++
		}
		i += k
	}
	return n
}

// slackEntity is the length of the escape Slack decodes at the start of s,
// or 0.
func slackEntity(s string) int {
	for _, e := range []string{"&amp;", "&lt;", "&gt;"} {
		if strings.HasPrefix(s, e) {
			return len(e)
		}
	}
	return 0
}
