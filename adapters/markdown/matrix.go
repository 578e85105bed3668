package markdown

import (
	"strconv"
	"strings"

	"github.com/parley-chat/parley/core"
)

// MatrixHTML is the formatted_body of a Matrix message in
// org.matrix.custom.html, the subset of HTML the specification recommends
// clients show: strong, em, del, code, pre with <code class="language-x">,
// a (http, https, ftp, mailto and magnet URLs), blockquote (nested as the
// source nests them), h1–h6, ul and ol (with start), li, table with thead
// and tbody, p, br and hr, with &, < and > escaped in text and " in
// attributes as well. Paragraphs are p elements, except a message that is
// one paragraph, and line breaks inside them br, as Element sends them.
// Raw HTML and what the walk cannot render within the account are shown as
// their escaped source in a p.
//
// A Matrix message carries a plain body beside formatted_body: the Plain
// rendering of the same markdown (see Matrix). Length counts the bytes of
// both, what the event's size limit applies to, before the event's JSON
// encoding adds its own escapes; the account counts runes of the visible
// text.
var MatrixHTML Dialect = matrixHTML{}

// Matrix renders md as a Matrix message: its plain body and its
// formatted_body in org.matrix.custom.html.
func Matrix(md string) (body, html string) {
	return Render(md, Plain), Render(md, MatrixHTML)
}

type matrixHTML struct{}

func (matrixHTML) Name() string                 { return "matrix" }
func (matrixHTML) Rules() Rules                 { return Rules{Markup: true} }
func (matrixHTML) Unit() core.LengthUnit        { return core.Runes }
func (matrixHTML) Visible(out string) int       { return htmlText(out, func(rune) int { return 1 }) }
func (matrixHTML) Length(md, out string) int    { return len(out) + len(Render(md, Plain)) }
func (matrixHTML) Escape(s string) string       { return escapeText(s) }
func (matrixHTML) Code(s string) (string, bool) { return "<code>" + escapeText(s) + "</code>", true }
func (matrixHTML) Break() string                { return "<br>" }
func (matrixHTML) Rule() string                 { return "<hr>" }

func (matrixHTML) AcceptLink(href string) bool {
	lower := strings.ToLower(href)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"), strings.HasPrefix(lower, "ftp://"):
		return webLink(href)
	case strings.HasPrefix(lower, "mailto:"):
		return len(href) > len("mailto:")
	case strings.HasPrefix(lower, "magnet:"):
		return len(href) > len("magnet:")
	}
	return false
}

func (matrixHTML) Literal(src string) string {
	return "<p>" + strings.ReplaceAll(escapeText(src), "\n", "<br>") + "</p>"
}

func (matrixHTML) Tags(f Format, href string) (string, string) {
	switch f {
	case Bold:
		return "<strong>", "</strong>"
	case Italic:
		return "<em>", "</em>"
	case Strike:
		return "<del>", "</del>"
	case Link:
		return `<a href="` + escapeAttr(href) + `">`, "</a>"
	}
	return "", ""
}

func (matrixHTML) Paragraph(s string, tight bool) string {
	if s == "" || tight {
		return s
	}
	return "<p>" + s + "</p>"
}

func (matrixHTML) Heading(level int, s string) string {
	h := "h" + strconv.Itoa(min(max(level, 1), 6))
	return "<" + h + ">" + s + "</" + h + ">"
}

func (matrixHTML) CodeBlock(lang, code string) string {
	open := "<pre><code>"
	if ValidLanguage(lang) {
		open = `<pre><code class="language-` + lang + `">`
	}
	return open + escapeText(code) + "</code></pre>"
}

func (matrixHTML) Quote(s string, _, _ bool) string {
	return "<blockquote>" + s + "</blockquote>"
}

func (matrixHTML) List(l List) string {
	var b strings.Builder
	name := "ul"
	switch {
	case !l.Ordered:
		b.WriteString("<ul>")
	case l.Start == 1:
		name = "ol"
		b.WriteString("<ol>")
	default:
		name = "ol"
		b.WriteString(`<ol start="` + strconv.Itoa(l.Start) + `">`)
	}
	for _, it := range l.Items {
		b.WriteString("\n<li>" + it.Content + "</li>")
	}
	b.WriteString("\n</" + name + ">")
	return b.String()
}

func (matrixHTML) Table(t Table) string {
	var b strings.Builder
	b.WriteString("<table>")
	for i, row := range t.Rows {
		cell := "td"
		switch i {
		case 0:
			cell = "th"
			b.WriteString("\n<thead><tr>")
		case 1:
			b.WriteString("\n<tbody>\n<tr>")
		default:
			b.WriteString("\n<tr>")
		}
		for _, c := range row {
			b.WriteString("<" + cell + ">" + c + "</" + cell + ">")
		}
		if i == 0 {
			b.WriteString("</tr></thead>")
		} else {
			b.WriteString("</tr>")
		}
	}
	if len(t.Rows) > 1 {
		b.WriteString("\n</tbody>")
	}
	b.WriteString("\n</table>")
	return b.String()
}
