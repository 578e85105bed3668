package markdown

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// bullets mark list items by nesting depth.
var bullets = []string{"•", "◦", "▪"}

// list renders a list's items and has the dialect lay them out. Ordered
// items are numbered from the list's start, or as the source wrote them
// when compact.
func (r *renderer) list(n *ast.List) string {
	depth := r.listDepth
	r.listDepth++
	defer func() { r.listDepth = depth }()
	l := List{Ordered: n.IsOrdered(), Start: n.Start, Depth: depth, Compact: r.compact}
	num := n.Start
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		it := Item{Marker: bullets[min(depth, len(bullets)-1)] + " ", Task: isTask(c)}
		if c != n.FirstChild() {
			it.Sep = r.sepBefore(c)
		}
		if l.Ordered {
			it.Marker = strconv.Itoa(num) + string(n.Marker) + " "
			if r.compact {
				it.Marker = r.sourceMarker(c)
			}
		}
		it.Content = r.children(c)
		l.Items = append(l.Items, it)
		num++
	}
	return r.d.List(l)
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

// textList lays a list out as text, one line per item: the marker, then
// the content with its further lines indented under the item's text by
// indent (unless compact). An unordered task item's check box stands for
// its bullet.
func textList(l List, indent func(s, ind string) string) string {
	var b strings.Builder
	for _, it := range l.Items {
		b.WriteString(it.Sep)
		marker := it.Marker
		width := utf8.RuneCountInString(marker)
		if !l.Ordered && it.Task {
			marker, width = "", 2
		}
		if it.Content == "" {
			b.WriteString(strings.TrimSuffix(marker, " "))
			continue
		}
		b.WriteString(marker)
		s := it.Content
		if !l.Compact {
			s = indent(s, strings.Repeat(" ", width))
		}
		b.WriteString(s)
	}
	return b.String()
}

// indentAll indents every line of s after the first, except empty lines.
func indentAll(s, ind string) string {
	return indentLines(s, ind, func(string) bool { return false })
}

// indentLines indents the lines of s after the first with ind, except
// empty lines and those keep reports true for. keep is called for every
// line, the first and empty ones too, in order, so that it can follow the
// blocks the lines belong to.
func indentLines(s, ind string, keep func(line string) bool) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if !keep(l) && i > 0 && l != "" {
			lines[i] = ind + l
		}
	}
	return strings.Join(lines, "\n")
}
