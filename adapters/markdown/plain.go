package markdown

import (
	"strings"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Plain is readable plain text with no markup: Telegram's fallback when it
// refuses a message's HTML ("can't parse entities"), and Matrix's body.
// Code blocks and tables keep their text, lists their bullets, numbers and
// indentation, quotes a "> " before each line; links show their URL in
// parentheses after their text when it differs (http, https, mailto and tg
// links, as Telegram would have made clickable). Length counts UTF-16 code
// units, as Telegram does.
var Plain Dialect = plain{}

type plain struct{}

func (plain) Name() string                         { return "plain" }
func (plain) Rules() Rules                         { return Rules{} }
func (plain) Unit() core.LengthUnit                { return core.UTF16 }
func (plain) Visible(out string) int               { return delivery.Measure(out, core.UTF16) }
func (plain) Length(_, out string) int             { return delivery.Measure(out, core.UTF16) }
func (plain) AcceptLink(href string) bool          { return telegramLink(href) }
func (plain) Escape(s string) string               { return s }
func (plain) Literal(src string) string            { return src }
func (plain) Tags(Format, string) (string, string) { return "", "" }
func (plain) Code(s string) (string, bool)         { return s, true }
func (plain) Break() string                        { return "\n" }
func (plain) Paragraph(s string, _ bool) string    { return s }
func (plain) Heading(_ int, s string) string       { return s }
func (plain) Rule() string                         { return "———" }
func (plain) CodeBlock(_, code string) string      { return code }
func (plain) List(l List) string                   { return textList(l, indentAll) }
func (plain) Table(t Table) string                 { return t.Text }

// Quote marks each line with "> " (an empty line with ">"), nested quotes
// once more; compact, the lines are left as they are.
func (plain) Quote(s string, _, compact bool) string {
	if compact {
		return s
	}
	return prefixLines(s, "> ")
}

// prefixLines puts p before every line of s, and p without its trailing
// space before empty ones.
func prefixLines(s, p string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l == "" {
			lines[i] = strings.TrimRight(p, " ")
		} else {
			lines[i] = p + l
		}
	}
	return strings.Join(lines, "\n")
}
