package markdown

import (
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// MaxGrowth is the most, in a dialect's Unit, by which the visible text of
// a rendering can exceed the source: Visible(Render(md, d)) is at most
// delivery.Measure(md, d.Unit()) + MaxGrowth. It is spent mostly on aligning
// table columns. For Telegram, whose limit counts the visible text,
// subtract it from the limit before splitting markdown by its source
// length.
const MaxGrowth = 256

// parser is goldmark configured for the agent's markdown. It keeps no
// state between calls.
var parser = goldmark.New(goldmark.WithExtensions(extension.GFM)).Parser()

// Render renders md in dialect d. The result is valid for the platform, is
// empty when md renders to nothing (blank, say, or only link definitions),
// and its visible text is within MaxGrowth of the source (see the package
// doc). It never panics; what it cannot render it shows as escaped text.
func Render(md string, d Dialect) string { return renderSafe(md, d, MaxGrowth) }

// Measure is the length d's platform counts for the message rendered from
// md: d.Length(md, Render(md, d)). It is what an adapter's RenderedLength
// returns, for splitting markdown by its rendered length.
func Measure(md string, d Dialect) int { return d.Length(md, Render(md, d)) }

// Fit renders md in d within budget, counted as d's platform counts
// (Length), when it can: as Render does, or else with no allowance for
// growth, every block that would add to the visible text in its compact
// form. fits reports whether the result is within budget; when it is not,
// the result is the shorter of the two renderings, and the caller should
// split md.
func Fit(md string, d Dialect, budget int) (out string, fits bool) {
	out = Render(md, d)
	n := d.Length(md, out)
	if n <= budget {
		return out, true
	}
	strict := renderSafe(md, d, 0)
	if m := d.Length(md, strict); m < n {
		return strict, m <= budget
	}
	return out, false
}

// renderSafe is render behind a last line of defence: a panic in the
// parser or the walk shows the source as text instead of losing it.
func renderSafe(md string, d Dialect, allow int) (out string) {
	defer func() {
		if recover() != nil {
			out = d.Literal(strings.TrimSpace(string(normalize(md))))
		}
	}()
	return render(md, d, allow)
}

// render renders md in d, its visible text growing by at most allow in
// d's Unit.
func render(md string, d Dialect, allow int) string {
	src := normalize(md)
	doc := parser.Parse(text.NewReader(src))
	r := &renderer{src: src, d: d, rules: d.Rules()}
	return r.document(doc, allow)
}

// normalize makes md safe to parse and to send without making it longer
// in runes or UTF-16 code units: CRLF and CR become LF, form feeds and
// vertical tabs spaces, other control characters and each byte of invalid
// UTF-8 U+FFFD (which delivery.Measure counts as one, like the byte).
func normalize(md string) []byte {
	b := make([]byte, 0, len(md))
	for i := 0; i < len(md); {
		c := md[i]
		switch {
		case c == '\r':
			b = append(b, '\n')
			i++
			if i < len(md) && md[i] == '\n' {
				i++
			}
			continue
		case c == '\f' || c == '\v':
			b = append(b, ' ')
		case c < 0x20 && c != '\n' && c != '\t':
			b = utf8.AppendRune(b, utf8.RuneError)
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(md[i:])
			if r == utf8.RuneError && size == 1 {
				b = utf8.AppendRune(b, utf8.RuneError)
			} else {
				b = append(b, md[i:i+size]...)
			}
			i += size
			continue
		default:
			b = append(b, c)
		}
		i++
	}
	return b
}
