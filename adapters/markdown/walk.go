package markdown

import (
	"bytes"
	"strings"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"

	"github.com/parley-chat/parley/core/delivery"
)

// renderer walks one document. Block renderers return their text without
// a trailing newline; containers join their children.
type renderer struct {
	src   []byte
	d     Dialect
	rules Rules
	// compact leaves out what may grow a block: sequential list numbers,
	// indentation, table padding, link URLs in plain text, quote prefixes.
	compact   bool
	inQuote   bool // inside a rendered blockquote
	listDepth int
	// slack is the length account's balance before the block: a table may
	// pad its columns by that much beyond its own source length.
	slack int
}

// measure is the source's length in the account's unit.
func (r *renderer) measure(b []byte) int { return delivery.Measure(string(b), r.d.Unit()) }

// document renders the top-level blocks one by one, keeping the length
// account described in the package doc, opened with allow.
func (r *renderer) document(doc ast.Node, allow int) string {
	type group struct {
		start  int
		render func() string
	}
	var groups []group
	for c := doc.FirstChild(); c != nil; c = c.NextSibling() {
		p := r.start(c)
		if p < 0 || p > len(r.src) || (len(groups) > 0 && p < groups[len(groups)-1].start) {
			// Positions this code does not understand: one account for all.
			groups = []group{{0, func() string { return r.children(doc) }}}
			break
		}
		groups = append(groups, group{p, func() string { return r.block(c) }})
	}
	var out strings.Builder
	credit := allow
	if len(groups) > 0 {
		credit += r.measure(r.src[:groups[0].start])
	}
	var prevWS []byte
	emitted := false
	for i, g := range groups {
		end := len(r.src)
		if i+1 < len(groups) {
			end = groups[i+1].start
		}
		region := r.src[g.start:end]
		content := bytes.TrimRight(region, " \t\n")
		ws := region[len(content):]
		size := r.measure(content)
		sep := ""
		if emitted {
			sep = "\n"
			if bytes.Count(prevWS, []byte("\n")) >= 2 {
				sep = "\n\n"
			}
		}
		budget := credit + size - len(sep)
		h := ""
		r.slack = credit
		for _, compact := range []bool{false, true} {
			r.compact = compact
			h = g.render()
			if h == "" || r.d.Visible(h) <= budget {
				break
			}
			h = ""
			if compact && len(content) > 0 {
				h = r.d.Literal(string(content))
			}
		}
		r.compact = false
		if h == "" {
			credit += size
		} else {
			out.WriteString(sep)
			out.WriteString(h)
			credit = budget - r.d.Visible(h)
			emitted = true
		}
		credit += r.measure(ws)
		prevWS = ws
	}
	return out.String()
}

// start is the source offset where block n starts, or -1.
func (r *renderer) start(n ast.Node) int {
	if t, ok := n.(*east.Table); ok && t.FirstChild() != nil {
		// A table split off a paragraph carries the paragraph's position.
		return t.FirstChild().Pos()
	}
	return n.Pos()
}

// lineStart is the offset of the start of the line holding offset p.
func (r *renderer) lineStart(p int) int {
	return bytes.LastIndexByte(r.src[:p], '\n') + 1
}

// lineEnd is the offset of the end of the line holding offset p.
func (r *renderer) lineEnd(p int) int {
	if i := bytes.IndexByte(r.src[p:], '\n'); i >= 0 {
		return p + i
	}
	return len(r.src)
}

// sepBefore separates block n from the one before it: a blank line where
// the source has one (inside a block quote a line of only '>' counts), else
// a line break.
func (r *renderer) sepBefore(n ast.Node) string {
	p := r.start(n)
	if p < 0 || p > len(r.src) {
		return "\n"
	}
	ls := r.lineStart(p)
	if ls == 0 {
		return "\n"
	}
	prev := r.src[r.lineStart(ls-1) : ls-1]
	if len(bytes.Trim(prev, " \t>")) == 0 {
		return "\n\n"
	}
	return "\n"
}

// children renders the blocks in n, separated.
func (r *renderer) children(n ast.Node) string {
	var b strings.Builder
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		s := r.block(c)
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(r.sepBefore(c))
		}
		b.WriteString(s)
	}
	return b.String()
}

// block renders one block.
func (r *renderer) block(n ast.Node) string {
	switch n := n.(type) {
	case *ast.Paragraph:
		_, top := n.Parent().(*ast.Document)
		alone := top && n.PreviousSibling() == nil && n.NextSibling() == nil
		return r.d.Paragraph(r.inlines(n, 0), alone)
	case *ast.TextBlock:
		return r.d.Paragraph(r.inlines(n, 0), true)
	case *ast.Heading:
		base := Format(0)
		if r.rules.HeadingBold {
			base = Bold
		}
		s := r.inlines(n, base)
		if s == "" {
			return ""
		}
		return r.d.Heading(n.Level, s)
	case *ast.ThematicBreak:
		return r.d.Rule()
	case *ast.FencedCodeBlock:
		return r.code(n, string(n.Language(r.src)))
	case *ast.CodeBlock:
		return r.code(n, "")
	case *ast.HTMLBlock:
		var b bytes.Buffer
		r.writeLines(&b, n)
		if n.HasClosure() {
			b.Write(n.ClosureLine.Value(r.src))
		}
		return r.literal(b.String())
	case *ast.Blockquote:
		return r.quote(n)
	case *ast.List:
		return r.list(n)
	case *east.Table:
		return r.table(n)
	case *ast.LinkReferenceDefinition:
		return ""
	}
	if c := n.FirstChild(); c != nil && c.Type() == ast.TypeInline {
		return r.d.Paragraph(r.inlines(n, 0), true)
	}
	if n.HasChildren() {
		return r.children(n)
	}
	var b bytes.Buffer
	r.writeLines(&b, n)
	return r.literal(b.String())
}

// literal shows source text as it is, without trailing white space.
func (r *renderer) literal(s string) string {
	s = strings.TrimRight(s, " \t\n")
	if s == "" {
		return ""
	}
	return r.d.Literal(s)
}

func (r *renderer) writeLines(b *bytes.Buffer, n ast.Node) {
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(r.src))
	}
}

// code renders a code block that has some text.
func (r *renderer) code(n ast.Node, lang string) string {
	var b bytes.Buffer
	r.writeLines(&b, n)
	s := strings.TrimSuffix(b.String(), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return r.d.CodeBlock(lang, s)
}

// quote renders a block quote.
func (r *renderer) quote(n ast.Node) string {
	outer := r.inQuote
	r.inQuote = true
	s := r.children(n)
	r.inQuote = outer
	if s == "" {
		return ""
	}
	return r.d.Quote(s, outer, r.compact)
}
