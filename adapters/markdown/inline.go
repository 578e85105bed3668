package markdown

import (
	"bufio"
	"bytes"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// inlines renders the inline content of block n, inside base formatting
// (0 for none).
func (r *renderer) inlines(n ast.Node, base Format) string {
	w := &inliner{r: r}
	if base != 0 {
		w.push(tag{f: base})
	}
	w.children(n)
	w.want = nil
	w.sync()
	return w.b.String()
}

// tag is a formatting in effect, with a link's URL.
type tag struct {
	f    Format
	href string
}

// inliner writes inline content. Formatting is opened lazily, right before
// the text it formats, so that none is empty, and so that what a dialect's
// Rules forbid around inline code or across a line break can be closed
// there and reopened after.
type inliner struct {
	r          *renderer
	b          strings.Builder
	want, open []tag
	textOnly   bool // table cells' monospace layout: text without markup or URLs
	inLink     bool // in a link's text: an image there is text only
}

func (w *inliner) tags() bool { return w.r.rules.Markup && !w.textOnly }

func (w *inliner) has(f Format) bool {
	for _, t := range w.want {
		if t.f == f {
			return true
		}
	}
	return false
}

// push adds a tag to the wanted formatting. It reports false, and adds
// nothing, when the output has no markup, for a formatting already in
// effect, and for formatting the dialect forbids in a link's text.
func (w *inliner) push(t tag) bool {
	if !w.tags() || w.has(t.f) || (w.inLink && w.r.rules.PlainLinkText) {
		return false
	}
	w.want = append(w.want, t)
	return true
}

func (w *inliner) pop(pushed bool) {
	if pushed {
		w.want = w.want[:len(w.want)-1]
	}
}

// sync makes the open tags the wanted ones, closing and opening as needed.
func (w *inliner) sync() {
	k := 0
	for k < len(w.open) && k < len(w.want) && w.open[k] == w.want[k] {
		k++
	}
	for len(w.open) > k {
		t := w.open[len(w.open)-1]
		_, c := w.r.d.Tags(t.f, t.href)
		w.b.WriteString(c)
		w.open = w.open[:len(w.open)-1]
	}
	for _, t := range w.want[k:] {
		o, _ := w.r.d.Tags(t.f, t.href)
		w.b.WriteString(o)
		w.open = append(w.open, t)
	}
}

// bare writes s, already in the output's form, with no formatting open.
func (w *inliner) bare(s string) {
	want := w.want
	w.want = nil
	w.sync()
	w.want = want
	w.b.WriteString(s)
}

// text writes s, unescaped text, with the wanted formatting.
func (w *inliner) text(s string) {
	if s == "" {
		return
	}
	if !w.tags() {
		w.b.WriteString(s)
		return
	}
	w.sync()
	w.b.WriteString(w.r.d.Escape(s))
}

// lineBreak writes a line break.
func (w *inliner) lineBreak() {
	switch {
	case !w.tags():
		w.b.WriteString("\n")
	case w.r.rules.LineFormatting:
		w.bare(w.r.d.Break())
	default:
		w.sync()
		w.b.WriteString(w.r.d.Break())
	}
}

// code writes inline code; inside a link it stays link text.
func (w *inliner) code(s string) {
	if !w.tags() || w.has(Link) || s == "" {
		w.text(s)
		return
	}
	c, ok := w.r.d.Code(s)
	switch {
	case !ok:
		w.text(s)
	case w.r.rules.CodeAlone:
		w.bare(c)
	default:
		w.sync()
		w.b.WriteString(c)
	}
}

func (w *inliner) children(n ast.Node) {
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		w.node(c)
	}
}

func (w *inliner) node(n ast.Node) {
	src := w.r.src
	switch n := n.(type) {
	case *ast.Text:
		if n.IsRaw() {
			w.text(string(n.Segment.Value(src)))
		} else {
			w.text(unescapeMarkdown(n.Segment.Value(src)))
		}
		if n.SoftLineBreak() || n.HardLineBreak() {
			w.lineBreak()
		}
	case *ast.String:
		if n.IsRaw() || n.IsCode() {
			w.text(string(n.Value))
		} else {
			w.text(unescapeMarkdown(n.Value))
		}
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			switch c := c.(type) {
			case *ast.Text:
				v := c.Segment.Value(src)
				if bytes.HasSuffix(v, []byte("\n")) {
					v = append(v[:len(v)-1:len(v)-1], ' ')
				}
				b.Write(v)
			case *ast.String:
				b.Write(c.Value)
			}
		}
		w.code(b.String())
	case *ast.Emphasis:
		f := Italic
		if n.Level >= 2 {
			f = Bold
		}
		pushed := w.push(tag{f: f})
		w.children(n)
		w.pop(pushed)
	case *east.Strikethrough:
		pushed := w.push(tag{f: Strike})
		w.children(n)
		w.pop(pushed)
	case *ast.Link:
		w.link(n.Destination, true, true, func() { w.children(n) })
	case *ast.Image:
		w.link(n.Destination, true, true, func() { w.children(n) })
	case *ast.AutoLink:
		u := n.URL(src)
		if n.AutoLinkType == ast.AutoLinkEmail && !bytes.HasPrefix(bytes.ToLower(u), []byte("mailto:")) {
			u = append([]byte("mailto:"), u...)
		}
		label := string(n.Label(src))
		w.link(u, false, false, func() { w.text(label) })
	case *ast.RawHTML:
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			w.text(string(seg.Value(src)))
		}
	case *east.TaskCheckBox:
		if n.IsChecked {
			w.text("☑ ")
		} else {
			w.text("☐ ")
		}
	default:
		w.children(n)
	}
}

// link writes a link around body when the dialect accepts its destination
// and it is not inside another link, else body alone. An empty body shows
// the URL; plain text shows the URL after a body that differs from it
// (when showURL). resolve says whether dest has markdown escapes and
// references.
func (w *inliner) link(dest []byte, resolve, showURL bool, body func()) {
	href := string(util.URLEscape(dest, resolve))
	ok := w.r.d.AcceptLink(href) && !w.inLink
	pushed := false
	if ok {
		pushed = w.push(tag{f: Link, href: href})
	}
	start := w.b.Len()
	outer := w.inLink
	w.inLink = true
	body()
	w.inLink = outer
	shown := w.b.String()[start:]
	display := ""
	if ok {
		display = string(dest)
		if resolve {
			display = unescapeMarkdown(dest)
		}
		if strings.HasPrefix(strings.ToLower(display), "mailto:") {
			display = display[len("mailto:"):]
		}
	}
	switch {
	case shown == "":
		w.text(display)
	case ok && showURL && !w.r.rules.Markup && !w.textOnly && !w.r.compact && strings.TrimSpace(shown) != display:
		w.text(" (" + display + ")")
	}
	w.pop(pushed)
}

// unescapeMarkdown resolves backslash escapes and character references in
// markdown text, as goldmark's HTML renderer does.
func unescapeMarkdown(v []byte) string {
	if bytes.IndexAny(v, "\\&\x00") < 0 {
		return string(v)
	}
	var buf bytes.Buffer
	bw := bufio.NewWriter(&buf)
	html.DefaultWriter.Write(bw, v)
	_ = bw.Flush()
	return htmlUnescaper.Replace(buf.String())
}

// htmlUnescaper undoes the escaping goldmark's writer applies.
var htmlUnescaper = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&amp;", "&")
