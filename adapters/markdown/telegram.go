package markdown

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// TelegramHTML is Telegram's HTML parse mode: the subset of HTML its
// parser accepts (b, i, s, code, pre with a code class for the language, a
// and blockquote), with <, > and & escaped everywhere and " in attributes.
// The output keeps to the nesting Telegram allows: nothing inside code or
// pre, code and pre inside nothing but a blockquote (bold text around
// inline code is closed and reopened), no link inside a link, no
// blockquote inside a blockquote (a quote in a quote joins the outer one),
// and no tag inside itself. What Telegram has no entity for degrades to
// text: headings become bold lines, lists "• item" and "1. item" lines
// with continuation lines indented, tables aligned monospace blocks in a
// pre, rules "———", raw HTML its own source, escaped. Links are kept for
// http and https URLs with a host, mailto and tg. Length counts UTF-16
// code units of the visible text, as VisibleLength does.
var TelegramHTML Dialect = telegramHTML{}

type telegramHTML struct{}

func (telegramHTML) Name() string { return "telegram" }

func (telegramHTML) Rules() Rules {
	return Rules{Markup: true, HeadingBold: true, CodeAlone: true}
}

func (telegramHTML) Unit() core.LengthUnit             { return core.UTF16 }
func (telegramHTML) Visible(out string) int            { return VisibleLength(out) }
func (telegramHTML) Length(_, out string) int          { return VisibleLength(out) }
func (telegramHTML) AcceptLink(href string) bool       { return telegramLink(href) }
func (telegramHTML) Escape(s string) string            { return escapeText(s) }
func (telegramHTML) Literal(src string) string         { return escapeText(src) }
func (telegramHTML) Code(s string) (string, bool)      { return "<code>" + escapeText(s) + "</code>", true }
func (telegramHTML) Break() string                     { return "\n" }
func (telegramHTML) Paragraph(s string, _ bool) string { return s }
func (telegramHTML) Heading(_ int, s string) string    { return s }
func (telegramHTML) Rule() string                      { return "———" }

func (telegramHTML) Tags(f Format, href string) (string, string) {
	switch f {
	case Bold:
		return "<b>", "</b>"
	case Italic:
		return "<i>", "</i>"
	case Strike:
		return "<s>", "</s>"
	case Link:
		return `<a href="` + escapeAttr(href) + `">`, "</a>"
	}
	return "", ""
}

func (telegramHTML) CodeBlock(lang, code string) string {
	if !ValidLanguage(lang) {
		return "<pre>" + escapeText(code) + "</pre>"
	}
	return `<pre><code class="language-` + lang + `">` + escapeText(code) + "</code></pre>"
}

func (telegramHTML) Quote(s string, nested, _ bool) string {
	if nested {
		return s
	}
	return "<blockquote>" + s + "</blockquote>"
}

func (telegramHTML) List(l List) string { return textList(l, telegramIndent) }

func (telegramHTML) Table(t Table) string { return "<pre>" + escapeText(t.Text) + "</pre>" }

// telegramIndent indents a list item's continuation lines, except those of
// code blocks and block quotes, which Telegram lays out as blocks of their
// own.
func telegramIndent(s, ind string) string {
	inBlock := 0 // open pre and blockquote tags
	return indentLines(s, ind, func(line string) bool {
		keep := inBlock > 0 || strings.HasPrefix(line, "<pre>") || strings.HasPrefix(line, "<blockquote>")
		inBlock += strings.Count(line, "<pre>") + strings.Count(line, "<blockquote>") -
			strings.Count(line, "</pre>") - strings.Count(line, "</blockquote>")
		return keep
	})
}

// telegramLink accepts links Telegram should open: http and https with a
// host, mailto and tg.
func telegramLink(u string) bool {
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		return webLink(u)
	case strings.HasPrefix(lower, "mailto:"):
		return len(u) > len("mailto:")
	case strings.HasPrefix(lower, "tg:"):
		return len(u) > len("tg:")
	}
	return false
}

// webLink reports whether u, an http or https URL, parses and has a host.
func webLink(u string) bool {
	p, err := url.Parse(u)
	return err == nil && p.Host != ""
}

// VisibleLength returns the length Telegram counts for a text sent in HTML
// parse mode: the UTF-16 code units of the text once tags are removed and
// &lt;, &gt;, &amp;, &quot; and numeric character references are decoded,
// following Telegram's own parser. Telegram also trims leading and trailing
// whitespace, which this does not, so it never undercounts.
func VisibleLength(html string) int { return htmlText(html, utf16Len) }

// htmlText counts the text of html once tags are removed and character
// references decoded, each character counting size(r).
func htmlText(html string, size func(rune) int) int {
	n := 0
	for i := 0; i < len(html); {
		switch c := html[i]; c {
		case '<':
			if j := tagEnd(html, i); j > 0 {
				i = j
				continue
			}
			n++
			i++
		case '&':
			if r, k := decodeEntity(html[i:]); k > 0 {
				n += size(r)
				i += k
				continue
			}
			n++
			i++
		default:
			r, k := utf8.DecodeRuneInString(html[i:])
			n += size(r)
			i += k
		}
	}
	return n
}

// tagEnd returns the offset just past the tag starting at s[i], or 0 when
// the tag is not closed. Quoted attribute values may hold '>'.
func tagEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '>':
			return j + 1
		case '"', '\'':
			k := strings.IndexByte(s[j+1:], s[j])
			if k < 0 {
				return 0
			}
			j += k + 1
		}
	}
	return 0
}

// decodeEntity decodes the character reference at the start of s the way
// Telegram does: &lt; &gt; &amp; &quot; and &#N; or &#xN; below U+10FFFF,
// the semicolon optional. size is 0 when s does not start with one.
func decodeEntity(s string) (r rune, size int) {
	if len(s) < 2 || s[0] != '&' {
		return 0, 0
	}
	end := 1
	if s[1] == '#' {
		end = 2
		base := 10
		if len(s) > 2 && s[2] == 'x' {
			end, base = 3, 16
		}
		v := 0
		for end < len(s) && digitVal(s[end], base) >= 0 {
			if end < 10 {
				v = v*base + digitVal(s[end], base)
			}
			end++
		}
		// Telegram gives up on references of ten bytes or more before ';'.
		if end >= 10 || v == 0 || v >= 0x10FFFF {
			return 0, 0
		}
		r = rune(v)
	} else {
		for end < len(s) && (s[end] >= 'a' && s[end] <= 'z' || s[end] >= 'A' && s[end] <= 'Z') {
			end++
		}
		switch s[1:end] {
		case "lt":
			r = '<'
		case "gt":
			r = '>'
		case "amp":
			r = '&'
		case "quot":
			r = '"'
		default:
			return 0, 0
		}
	}
	if end < len(s) && s[end] == ';' {
		end++
	}
	return r, end
}

func digitVal(c byte, base int) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case base == 16 && c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case base == 16 && c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func utf16Len(r rune) int {
	if r > 0xFFFF {
		return 2
	}
	return 1
}
