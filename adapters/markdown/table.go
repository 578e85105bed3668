package markdown

import (
	"strings"
	"unicode"

	east "github.com/yuin/goldmark/extension/ast"
	"golang.org/x/text/width"

	"github.com/parley-chat/parley/core/delivery"
)

// table renders a table's cells and has the dialect lay them out. The
// monospace layout has its columns aligned and padded when that fits in the
// table's own source length and the account's balance, else its cells
// separated by " | " or, compact, "|" without padding.
func (r *renderer) table(t *east.Table) string {
	var rows, formatted [][]string
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		var cells, rich []string
		for c := row.FirstChild(); c != nil; c = c.NextSibling() {
			w := &inliner{r: r, textOnly: true}
			w.children(c)
			cells = append(cells, strings.Map(func(r rune) rune {
				if r == '\t' || r == '\n' {
					return ' '
				}
				return r
			}, w.b.String()))
			f := &inliner{r: r}
			f.children(c)
			f.want = nil
			f.sync()
			rich = append(rich, f.b.String())
		}
		rows = append(rows, cells)
		formatted = append(formatted, rich)
	}
	if len(rows) == 0 {
		return ""
	}
	budget := -1
	first, last := t.FirstChild().Pos(), t.LastChild().Pos()
	if first >= 0 && last >= first && last < len(r.src) {
		budget = r.measure(r.src[r.lineStart(first):r.lineEnd(last)])
	}
	s := joinedTable(rows, "|")
	if !r.compact && budget >= 0 {
		for _, c := range []string{alignedTable(rows, t.Alignments), joinedTable(rows, " | ")} {
			if delivery.Measure(c, r.d.Unit()) <= budget+r.slack {
				s = c
				break
			}
		}
	}
	if strings.TrimSpace(s) == "" {
		return ""
	}
	return r.d.Table(Table{Text: s, Rows: formatted})
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
