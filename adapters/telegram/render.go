package telegram

import (
	"bufio"
	"bytes"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
	"golang.org/x/text/width"

	"github.com/parley-chat/parley/core"
)

// Rendering the agent's markdown for Telegram's HTML parse mode.
//
// The markdown is parsed with goldmark (CommonMark plus GFM tables,
// strikethrough, autolinks and task lists) and the tree is written out in
// the subset of HTML Telegram's parser accepts: b, i, s, code, pre (with a
// code class for the language), a and blockquote, with <, > and & escaped
// everywhere and " in attributes. The output also keeps to the nesting
// Telegram allows: nothing inside code or pre, code and pre inside nothing
// but a blockquote (bold text around inline code is closed and reopened),
// no link inside a link, no blockquote inside a blockquote, and no tag
// inside itself. What Telegram has no entity for degrades to text: headings
// become bold lines, lists "• item" and "1. item" lines, tables aligned
// monospace blocks, raw HTML its own source, escaped.
//
// Length. Telegram limits a message to 4096 UTF-16 code units of visible
// text, counted after entity parsing. Most markup only shrinks when
// rendered (markers, fences, URLs and escapes disappear), but some
// renderings add text the source does not have: list numbers counted up
// past what the source wrote ("1." on every item renders "10." at the
// tenth), continuation lines indented under their bullet where the source
// used a tab or a lazy line, table columns padded to a common width, a
// plain-text link's " (url)". Unchecked, these grow without bound (one wide
// cell pads every row of a long table), so the renderer keeps an account.
// It starts with MaxGrowth; each top-level block adds what its rendering
// saves on its source and pays for what it adds; a block that would
// overdraw the account is rendered again in a compact form (list numbers as
// the source wrote them, no indentation, unpadded tables, no link URLs) or,
// failing that, shown as its escaped source. Separators between blocks are
// at most the line breaks the source has there. Hence, for every md,
//
//	VisibleLength(RenderHTML(md)) <= core.Measure(md, core.UTF16) + MaxGrowth
//	core.Measure(PlainText(md), core.UTF16) <= core.Measure(md, core.UTF16) + MaxGrowth
//
// and a chunk cut with core.Split(md, 4096-MaxGrowth, core.UTF16) renders
// within Telegram's limit.

// MaxGrowth is the most, in UTF-16 code units, by which RenderHTML's
// visible text or PlainText can exceed core.Measure(md, core.UTF16):
// subtract it from Telegram's limit before splitting markdown. It is spent
// mostly on aligning table columns.
const MaxGrowth = 256

// markdown is goldmark configured for the agent's dialect. Its parser keeps
// no state between calls.
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// RenderHTML renders md as a message text for Telegram's HTML parse mode.
// The result is always accepted by Telegram's parser, is empty when md
// renders to nothing (blank, say, or only link definitions), and its
// VisibleLength is at most
// core.Measure(md, core.UTF16) + MaxGrowth. It never panics; what it cannot
// render it shows as escaped text.
func RenderHTML(md string) string { return renderSafe(md, false) }

// PlainText renders md as readable plain text with no markup, for
// resending a message Telegram refused with "can't parse entities": code
// blocks keep their content and lists their bullets, numbers and
// indentation, links show their URL after the text. Like RenderHTML, it is
// at most MaxGrowth UTF-16 code units longer than md.
func PlainText(md string) string { return renderSafe(md, true) }

// VisibleLength returns the length Telegram counts for a text sent in HTML
// parse mode: the UTF-16 code units of the text once tags are removed and
// &lt;, &gt;, &amp;, &quot; and numeric character references are decoded,
// following Telegram's own parser. Telegram also trims leading and trailing
// whitespace, which this does not, so it never undercounts.
func VisibleLength(html string) int {
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
			if r, size := decodeEntity(html[i:]); size > 0 {
				n += utf16Len(r)
				i += size
				continue
			}
			n++
			i++
		default:
			r, size := utf8.DecodeRuneInString(html[i:])
			n += utf16Len(r)
			i += size
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

// renderSafe is render behind a last line of defence: a panic in the
// parser or the renderer shows the source as text instead of losing it.
func renderSafe(md string, plain bool) (out string) {
	defer func() {
		if recover() != nil {
			src := strings.TrimSpace(string(normalize(md)))
			if plain {
				out = src
			} else {
				out = escapeText(src)
			}
		}
	}()
	return render(md, plain, MaxGrowth)
}

// render renders md as Telegram HTML, or as plain text, growing it by at
// most allow UTF-16 code units.
func render(md string, plain bool, allow int) string {
	src := normalize(md)
	doc := markdown.Parser().Parse(text.NewReader(src))
	r := &renderer{src: src, plain: plain}
	return r.document(doc, allow)
}

// normalize makes md safe to parse and to send without making it longer
// in UTF-16 code units: CRLF and CR become LF, form feeds and vertical tabs
// spaces, other control characters and each byte of invalid UTF-8 U+FFFD
// (which core.Measure counts as one, like the byte).
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

// renderer writes one document. Block renderers return their text without
// a trailing newline; containers join their children.
type renderer struct {
	src   []byte
	plain bool // plain text instead of HTML
	// compact leaves out what may grow a block: sequential list numbers,
	// indentation, table padding, link URLs in plain text.
	compact   bool
	inQuote   bool // inside a rendered blockquote
	listDepth int
	// slack is the length account's balance before the block: a table may
	// pad its columns by that much beyond its own source length.
	slack int
}

// vis is the length Telegram counts for rendered output.
func (r *renderer) vis(s string) int {
	if r.plain {
		return core.Measure(s, core.UTF16)
	}
	return VisibleLength(s)
}

// literal shows source text as it is.
func (r *renderer) literal(s string) string {
	if r.plain {
		return s
	}
	return escapeText(s)
}

// document renders the top-level blocks one by one, keeping the length
// account described at the top of the file, opened with allow.
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
		credit += core.Measure(string(r.src[:groups[0].start]), core.UTF16)
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
		size := core.Measure(string(content), core.UTF16)
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
			if h == "" || r.vis(h) <= budget {
				break
			}
			h = ""
			if compact && len(content) > 0 {
				h = r.literal(string(content))
			}
		}
		r.compact = false
		if h == "" {
			credit += size
		} else {
			out.WriteString(sep)
			out.WriteString(h)
			credit = budget - r.vis(h)
			emitted = true
		}
		credit += core.Measure(string(ws), core.UTF16)
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
	case *ast.Paragraph, *ast.TextBlock:
		return r.inlines(n, "")
	case *ast.Heading:
		return r.inlines(n, "b")
	case *ast.ThematicBreak:
		return "———"
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
		return r.literal(strings.TrimRight(b.String(), " \t\n"))
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
		return r.inlines(n, "")
	}
	if n.HasChildren() {
		return r.children(n)
	}
	var b bytes.Buffer
	r.writeLines(&b, n)
	return r.literal(strings.TrimRight(b.String(), " \t\n"))
}

func (r *renderer) writeLines(b *bytes.Buffer, n ast.Node) {
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		b.Write(seg.Value(r.src))
	}
}

// code renders a code block, with its language when Telegram can take it.
func (r *renderer) code(n ast.Node, lang string) string {
	var b bytes.Buffer
	r.writeLines(&b, n)
	s := strings.TrimSuffix(b.String(), "\n")
	if strings.TrimSpace(s) == "" {
		return ""
	}
	if r.plain {
		return s
	}
	if !validLanguage(lang) {
		return "<pre>" + escapeText(s) + "</pre>"
	}
	return `<pre><code class="language-` + lang + `">` + escapeText(s) + "</code></pre>"
}

// validLanguage accepts the language names people write after a fence
// ("go", "c++", "objective-c", "f#") and nothing that needs escaping.
func validLanguage(lang string) bool {
	if lang == "" || len(lang) > 32 {
		return false
	}
	for i := 0; i < len(lang); i++ {
		c := lang[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '+' || c == '#' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// quote renders a block quote. Telegram cannot nest them, so a quote in a
// quote joins the outer one; plain text marks quoted lines with "> ".
func (r *renderer) quote(n ast.Node) string {
	outer := r.inQuote
	r.inQuote = true
	s := r.children(n)
	r.inQuote = outer
	switch {
	case s == "":
		return ""
	case r.plain && r.compact:
		return s
	case r.plain:
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			if l == "" {
				lines[i] = ">"
			} else {
				lines[i] = "> " + l
			}
		}
		return strings.Join(lines, "\n")
	case outer:
		return s
	}
	return "<blockquote>" + s + "</blockquote>"
}

// bullets mark list items by nesting depth.
var bullets = []string{"•", "◦", "▪"}

// list renders a list as one line per item, nested lists and further
// paragraphs indented under the item's text.
func (r *renderer) list(n *ast.List) string {
	depth := r.listDepth
	r.listDepth++
	defer func() { r.listDepth = depth }()
	var b strings.Builder
	num := n.Start
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if c != n.FirstChild() {
			b.WriteString(r.sepBefore(c))
		}
		marker := bullets[min(depth, len(bullets)-1)] + " "
		if n.IsOrdered() {
			marker = strconv.Itoa(num) + string(n.Marker) + " "
			if r.compact {
				marker = r.sourceMarker(c)
			}
		}
		indent := utf8.RuneCountInString(marker)
		if !n.IsOrdered() && isTask(c) {
			marker, indent = "", 2 // the check box stands for the bullet
		}
		s := r.children(c)
		if s == "" {
			b.WriteString(strings.TrimSuffix(marker, " "))
		} else {
			b.WriteString(marker)
			if !r.compact {
				s = r.indent(s, strings.Repeat(" ", indent))
			}
			b.WriteString(s)
		}
		num++
	}
	return b.String()
}

// sourceMarker is an ordered list item's marker as the source wrote it.
func (r *renderer) sourceMarker(item ast.Node) string {
	p := item.Pos()
	if p < 0 || p >= len(r.src) {
		return bullets[0] + " "
	}
	j := p
	for j < len(r.src) && j-p < 9 && r.src[j] >= '0' && r.src[j] <= '9' {
		j++
	}
	if j == p || j >= len(r.src) || (r.src[j] != '.' && r.src[j] != ')') {
		return bullets[0] + " "
	}
	return string(r.src[p:j+1]) + " "
}

func isTask(item ast.Node) bool {
	if p := item.FirstChild(); p != nil {
		_, ok := p.FirstChild().(*east.TaskCheckBox)
		return ok
	}
	return false
}

// indent indents the lines of s after the first, except empty lines and,
// in HTML, the lines of code blocks and block quotes, which Telegram lays
// out as blocks of their own.
func (r *renderer) indent(s, ind string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var b strings.Builder
	inBlock := 0 // open pre and blockquote tags
	for i := 0; i < len(s); i++ {
		c := s[i]
		b.WriteByte(c)
		if c == '<' && !r.plain {
			switch rest := s[i:]; {
			case strings.HasPrefix(rest, "<pre>"), strings.HasPrefix(rest, "<blockquote>"):
				inBlock++
			case strings.HasPrefix(rest, "</pre>"), strings.HasPrefix(rest, "</blockquote>"):
				inBlock--
			}
		}
		if c != '\n' || i+1 == len(s) || s[i+1] == '\n' {
			continue
		}
		if inBlock > 0 || !r.plain && (strings.HasPrefix(s[i+1:], "<pre>") || strings.HasPrefix(s[i+1:], "<blockquote>")) {
			continue
		}
		b.WriteString(ind)
	}
	return b.String()
}

// table renders a table as a monospace block: columns aligned and padded
// when that fits in the table's own source length and the slack, else cells
// separated by " | " or "|" without padding.
func (r *renderer) table(t *east.Table) string {
	var rows [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			w := &inliner{r: r, textOnly: true}
			w.children(c)
			cells = append(cells, strings.Map(func(r rune) rune {
				if r == '\t' || r == '\n' {
					return ' '
				}
				return r
			}, w.b.String()))
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		return ""
	}
	budget := -1
	first, last := t.FirstChild().Pos(), t.LastChild().Pos()
	if first >= 0 && last >= first && last < len(r.src) {
		budget = core.Measure(string(r.src[r.lineStart(first):r.lineEnd(last)]), core.UTF16)
	}
	s := joinedTable(rows, "|")
	if !r.compact && budget >= 0 {
		for _, c := range []string{alignedTable(rows, t.Alignments), joinedTable(rows, " | ")} {
			if core.Measure(c, core.UTF16) <= budget+r.slack {
				s = c
				break
			}
		}
	}
	if strings.TrimSpace(s) == "" {
		return ""
	}
	if r.plain {
		return s
	}
	return "<pre>" + escapeText(s) + "</pre>"
}

// alignedTable lays rows out in columns, with a rule under the header.
func alignedTable(rows [][]string, align []east.Alignment) string {
	ncol := len(align)
	widths := make([]int, ncol)
	for _, row := range rows {
		for j := 0; j < len(row) && j < ncol; j++ {
			widths[j] = max(widths[j], displayWidth(row[j]))
		}
	}
	var b strings.Builder
	line := func(cells []string, rule bool) {
		var l strings.Builder
		n := ncol
		if !rule {
			for n > 1 && (n > len(cells) || cells[n-1] == "") {
				n-- // no separators for missing cells at the end
			}
		}
		for j := range n {
			if j > 0 {
				if rule {
					l.WriteString("-+-")
				} else {
					l.WriteString(" | ")
				}
			}
			if rule {
				l.WriteString(strings.Repeat("-", max(widths[j], 1)))
				continue
			}
			cell := ""
			if j < len(cells) {
				cell = cells[j]
			}
			pad := widths[j] - displayWidth(cell)
			left := 0
			switch align[j] {
			case east.AlignRight:
				left = pad
			case east.AlignCenter:
				left = pad / 2
			}
			l.WriteString(strings.Repeat(" ", left))
			l.WriteString(cell)
			l.WriteString(strings.Repeat(" ", pad-left))
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
	}
	for i, row := range rows {
		line(row, false)
		if i == 0 {
			line(nil, true)
		}
	}
	return b.String()
}

// joinedTable writes rows with their cells separated by sep, trailing
// empty cells left out.
func joinedTable(rows [][]string, sep string) string {
	var b strings.Builder
	for i, row := range rows {
		if i > 0 {
			b.WriteByte('\n')
		}
		n := len(row)
		for n > 0 && strings.TrimSpace(row[n-1]) == "" {
			n--
		}
		b.WriteString(strings.Join(row[:n], sep))
	}
	return b.String()
}

// displayWidth estimates the columns s takes in a monospace font: two for
// East Asian wide characters and emoji, none for combining marks, joiners
// and the characters a zero-width joiner attaches.
func displayWidth(s string) int {
	w, last := 0, 0
	joined := false
	for _, c := range s {
		switch {
		case c == '\u200d':
			joined = true
			continue
		case c == '\ufe0f': // emoji presentation widens the character before it
			if last == 1 {
				w++
				last = 2
			}
			continue
		case c >= 0x1F3FB && c <= 0x1F3FF, c >= 0xFE00 && c <= 0xFE0E, c >= 0xE0000 && c <= 0xE0FFF,
			unicode.In(c, unicode.Mn, unicode.Me, unicode.Cf, unicode.Cc):
			continue
		}
		if joined {
			joined = false
			continue
		}
		last = 1
		switch width.LookupRune(c).Kind() {
		case width.EastAsianWide, width.EastAsianFullwidth:
			last = 2
		}
		w += last
	}
	return w
}

// inlines renders the inline content of block n, inside a base tag.
func (r *renderer) inlines(n ast.Node, base string) string {
	w := &inliner{r: r}
	if base != "" {
		w.push(tag{name: base})
	}
	w.children(n)
	w.want = nil
	w.sync()
	return w.b.String()
}

// tag is an HTML formatting tag, with a link's href.
type tag struct{ name, href string }

// inliner writes inline content. Tags are opened lazily, right before the
// text they format, so that no empty tags are written and inline code can
// close the formatting around it (Telegram allows code inside nothing but a
// blockquote) and have it reopened after.
type inliner struct {
	r          *renderer
	b          strings.Builder
	want, open []tag
	textOnly   bool // table cells: text without tags or URLs
	inLink     bool // in a link's text: an image there is text only
}

func (w *inliner) tags() bool { return !w.r.plain && !w.textOnly }

func (w *inliner) has(name string) bool {
	for _, t := range w.want {
		if t.name == name {
			return true
		}
	}
	return false
}

// push adds a tag to the wanted formatting. It reports false, and adds
// nothing, for plain output and for a tag already in effect (Telegram
// rejects a tag inside itself).
func (w *inliner) push(t tag) bool {
	if !w.tags() || w.has(t.name) {
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
		w.b.WriteString("</" + w.open[len(w.open)-1].name + ">")
		w.open = w.open[:len(w.open)-1]
	}
	for _, t := range w.want[k:] {
		if t.name == "a" {
			w.b.WriteString(`<a href="` + escapeAttr(t.href) + `">`)
		} else {
			w.b.WriteString("<" + t.name + ">")
		}
		w.open = append(w.open, t)
	}
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
	w.b.WriteString(escapeText(s))
}

// code writes inline code; inside a link it stays link text.
func (w *inliner) code(s string) {
	if !w.tags() || w.has("a") || s == "" {
		w.text(s)
		return
	}
	want := w.want
	w.want = nil
	w.sync()
	w.want = want
	w.b.WriteString("<code>" + escapeText(s) + "</code>")
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
			w.text("\n")
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
		name := "i"
		if n.Level >= 2 {
			name = "b"
		}
		pushed := w.push(tag{name: name})
		w.children(n)
		w.pop(pushed)
	case *east.Strikethrough:
		pushed := w.push(tag{name: "s"})
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

// link writes a link around body when its destination is one Telegram
// should open and it is not inside another link, else body alone. An empty body shows the URL; plain text
// shows the URL after a body that differs from it (when showURL). resolve
// says whether dest has markdown escapes and references.
func (w *inliner) link(dest []byte, resolve, showURL bool, body func()) {
	href, ok := linkURL(dest, resolve)
	ok = ok && !w.inLink
	pushed := false
	if ok {
		pushed = w.push(tag{name: "a", href: href})
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
	case ok && showURL && w.r.plain && !w.textOnly && !w.r.compact && strings.TrimSpace(shown) != display:
		w.text(" (" + display + ")")
	}
	w.pop(pushed)
}

// linkURL returns dest as an href when it is a link Telegram should get:
// http and https with a host, mailto and tg.
func linkURL(dest []byte, resolve bool) (string, bool) {
	u := string(util.URLEscape(dest, resolve))
	lower := strings.ToLower(u)
	switch {
	case strings.HasPrefix(lower, "http://"), strings.HasPrefix(lower, "https://"):
		p, err := url.Parse(u)
		return u, err == nil && p.Host != ""
	case strings.HasPrefix(lower, "mailto:"):
		return u, len(u) > len("mailto:")
	case strings.HasPrefix(lower, "tg:"):
		return u, len(u) > len("tg:")
	}
	return "", false
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

var (
	textEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	attrEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")
)

func escapeText(s string) string { return textEscaper.Replace(s) }
func escapeAttr(s string) string { return attrEscaper.Replace(s) }
