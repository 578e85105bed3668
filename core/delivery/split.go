package delivery

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

// Splitting markdown for platforms' length limits.
//
// Split and Tail cut only between runes, so valid UTF-8 stays valid and a
// character outside the Basic Multilingual Plane (two UTF-16 code units) is
// never halved. They understand one markdown construct, fenced code blocks
// as CommonMark defines them (up to three spaces of indentation, three or
// more backticks or tildes, a closing fence of the same character at least
// as long), so that a cut inside a block leaves every piece rendering as
// code: the piece before it gets a closing fence, the piece after it the
// opening fence line again (its info string and indentation included). The
// added fence lines count toward the limit. Fences are recognised at the top
// level only, not inside block quotes or list items; everything else is
// plain text to them.
//
// When the limit is too small to hold a code block's fence lines and some of
// its text, the piece is cut without adding fences (a plain hard cut). That
// keeps every piece within the limit and the text whole, at the price of
// that piece's rendering. A single character longer than the limit (max < 4
// in Bytes, max < 2 in UTF16) is the one case where a piece exceeds it.

// Measure returns the length of s counted in u: UTF-8 bytes, runes, or
// UTF-16 code units (a rune above U+FFFF counts two). Each byte of invalid
// UTF-8 counts as one rune, as it would once replaced by U+FFFD.
func Measure(s string, u core.LengthUnit) int {
	switch u {
	case core.Runes:
		return utf8.RuneCountInString(s)
	case core.UTF16:
		n := 0
		for _, r := range s {
			n += runeLen(r, 1, core.UTF16)
		}
		return n
	}
	return len(s)
}

// runeLen is Measure of one rune that takes size bytes.
func runeLen(r rune, size int, u core.LengthUnit) int {
	switch u {
	case core.Runes:
		return 1
	case core.UTF16:
		if r > 0xFFFF {
			return 2
		}
		return 1
	}
	return size
}

// Split cuts md into chunks whose Measure in u is at most max, for a
// platform that cannot take md in one message. A md that fits, or a max <= 0,
// gives one chunk, md itself; Split never returns no chunks (a md of only
// whitespace too long for max gives one empty chunk).
//
// Cuts prefer, in this order: a paragraph boundary outside code (a blank
// line, or the edge of a code block or of a heading), a blank line inside
// code, any line end, a space, and only then a point inside a word (and
// there preferably not inside a cluster of combining marks or joined emoji).
// Among cuts of the same kind the one making the chunk longest wins, so a
// short paragraph followed by a long one becomes two chunks rather than the
// long one being cut. Whitespace at a cut is dropped: chunks neither start
// nor end with blank lines or spaces, though a chunk starting at a line keeps
// that line's indentation. Leading blank lines and trailing whitespace of md
// are dropped too once it has to be split.
//
// A cut inside a fenced code block closes the block at the end of the chunk
// and reopens it, with the same fence and info string, at the start of the
// next; see the notes on fences above for what happens when max cannot hold
// them. A mid-line cut never leaves a chunk whose first line would read as a
// fence.
func Split(md string, max int, u core.LengthUnit) []string {
	if max <= 0 || Measure(md, u) <= max {
		return []string{md}
	}
	d := parseDoc(md, u)
	cs := d.split(max)
	if len(cs) == 0 {
		return []string{""} // md was only whitespace
	}
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.text(md)
	}
	return out
}

// Tail is the live view of an output too long for one message: md itself
// when it fits in max (or max <= 0); otherwise marker and a newline followed
// by the end of md, as much of it as fits in max in total. The shown part
// starts at the beginning of a line where one fits, else after a space, else
// anywhere between runes. When it starts inside a fenced code block, the
// block's opening fence line follows the marker so the tail renders as code.
// Trailing whitespace of md is dropped once it has to be cut.
//
// marker should be one short line ("…"); an empty marker adds no line. When
// max is too small for the marker and some text, the fence is left out
// first, then the marker: the result never exceeds max, and is empty only if
// not even md's last character fits.
func Tail(md string, max int, u core.LengthUnit, marker string) string {
	if max <= 0 || Measure(md, u) <= max {
		return md
	}
	t := parseDoc(md, u).tail(max, marker)
	return t.head + t.prefix + md[t.start:t.end]
}

// tailPart is what Tail shows: head + prefix + md[start:end].
type tailPart struct {
	head       string // the marker line, or ""
	prefix     string // the reopened fence line, or ""
	start, end int
}

// tail finds the tail of the document that fits in limit with its marker.
func (d *mdDoc) tail(limit int, marker string) tailPart {
	s0, n := d.bounds()
	if Measure(d.md[s0:n], d.u) <= limit {
		return tailPart{start: s0, end: n} // only whitespace had to go
	}
	head := ""
	if marker != "" {
		head = marker + "\n"
	}
	modes := []struct {
		head   string
		fences bool
	}{{head, true}, {head, false}, {"", false}}
	for _, m := range modes {
		if prefix, t, ok := d.tailAt(s0, n, limit-Measure(m.head, d.u), m.fences); ok {
			return tailPart{head: m.head, prefix: prefix, start: t, end: n}
		}
	}
	return tailPart{}
}

// lineKind is what a line is with respect to fenced code blocks.
type lineKind uint8

const (
	lineText  lineKind = iota // outside code
	lineOpen                  // an opening fence
	lineCode                  // inside a code block
	lineClose                 // a closing fence
)

// codeFence is one fenced code block's fence.
type codeFence struct {
	open  string // the opening line without trailing whitespace
	close string // the fence characters of the opening line
	// suffix closes the block at the end of a chunk: a newline and close.
	// It is ASCII, so its length is its Measure in every unit.
	suffix string
}

// mdLine is one line of the document.
type mdLine struct {
	start, end int // byte offsets; end excludes the newline
	kind       lineKind
	blank      bool
	heading    bool
	fence      *codeFence // the block the line opens, is in or closes
	sig        fenceSig   // of the line from its start
}

// codeAfter reports whether the text right after the line is inside a block.
func (l *mdLine) codeAfter() bool { return l.kind == lineOpen || l.kind == lineCode }

// isFence reports whether the line is an opening or closing fence.
func (l *mdLine) isFence() bool { return l.kind == lineOpen || l.kind == lineClose }

// mdDoc is a document parsed into lines with their fence state.
type mdDoc struct {
	md      string
	u       core.LengthUnit
	lines   []mdLine
	lastRun fenceSig // see restReads
}

// parseDoc splits md into lines and follows its fenced code blocks.
func parseDoc(md string, u core.LengthUnit) *mdDoc {
	d := &mdDoc{md: md, u: u, lines: make([]mdLine, 0, strings.Count(md, "\n")+1)}
	var open *codeFence
	for start := 0; ; {
		end := strings.IndexByte(md[start:], '\n')
		if end < 0 {
			end = len(md)
		} else {
			end += start
		}
		l := mdLine{start: start, end: end, blank: isBlank(md[start:end])}
		l.sig = d.sigAt(start, end)
		switch {
		case open != nil:
			l.fence = open
			l.kind = lineCode
			if l.sig.closes(end, open) {
				l.kind = lineClose
				open = nil
			}
		case l.sig.opens(end):
			g := l.sig
			open = &codeFence{
				open:   strings.TrimRight(md[start:end], spaceChars),
				close:  md[g.i:g.j],
				suffix: "\n" + md[g.i:g.j],
			}
			l.kind, l.fence = lineOpen, open
		default:
			l.heading = isHeading(md[start:end])
		}
		d.lines = append(d.lines, l)
		if end == len(md) {
			return d
		}
		start = end + 1
	}
}

// fenceSig tells whether a piece of a line, md[a:end] for any end up to
// the limit it was computed for, reads as a fence. A line cut short can read
// as a fence where the whole line does not ("```a`b" cut to "```a"), and so
// can a line's rest after a mid-line cut; computed once per line or piece,
// it answers for every end in constant time.
type fenceSig struct {
	ch   byte // '`' or '~' after at most three spaces, else 0
	i, j int  // md[i:j] is the run of ch
	tick int  // the first '`' at or after j, or the limit
	word int  // the first non-space at or after j, or the limit
}

// sigAt computes the fenceSig of md[a:lim].
func (d *mdDoc) sigAt(a, lim int) fenceSig {
	md := d.md
	i := a
	for i < lim && i-a < 4 && md[i] == ' ' {
		i++
	}
	if i-a > 3 || i >= lim || (md[i] != '`' && md[i] != '~') {
		return fenceSig{}
	}
	j := i
	for j < lim && md[j] == md[i] {
		j++
	}
	return d.sigAfter(md[i], i, j, lim)
}

// sigAfter completes a fenceSig whose run is md[i:j].
func (d *mdDoc) sigAfter(ch byte, i, j, lim int) fenceSig {
	tick := lim
	if k := strings.IndexByte(d.md[j:lim], '`'); k >= 0 {
		tick = j + k
	}
	word := j
	for word < lim && isSpace(d.md[word]) {
		word++
	}
	return fenceSig{ch: ch, i: i, j: j, tick: tick, word: word}
}

// opens reports whether the piece up to end is an opening fence: three or
// more fence characters, and for backticks no backtick in the info string.
func (g fenceSig) opens(end int) bool {
	return g.ch != 0 && min(g.j, end)-g.i >= 3 && (g.ch == '~' || g.tick >= end)
}

// closes reports whether the piece up to end closes the block of f: at
// least as many of the same fence character, then only spaces.
func (g fenceSig) closes(end int, f *codeFence) bool {
	return g.ch == f.close[0] && min(g.j, end)-g.i >= len(f.close) && g.word >= end
}

// reads reports whether the piece up to end reads as a fence on line l:
// an opening fence outside code, the block's closing fence inside it.
func (g fenceSig) reads(end int, l *mdLine) bool {
	if l.kind == lineCode {
		return g.closes(end, l.fence)
	}
	return g.opens(end)
}

// restReads reports whether md[p:l.end], the rest of line l after a
// mid-line cut, reads as a fence on l. md[p] is not a space. It remembers
// the last fence run it measured, so that cuts inside one long run of
// backticks, in one chunk or many, cost no more than one.
func (d *mdDoc) restReads(p int, l *mdLine) bool {
	c := d.md[p]
	if c != '`' && c != '~' {
		return false
	}
	if g := d.lastRun; g.ch != c || p < g.i || p >= g.j {
		j := p
		for j < l.end && d.md[j] == c {
			j++
		}
		d.lastRun = d.sigAfter(c, p, j, l.end)
	}
	g := d.lastRun
	g.i = p
	return g.reads(l.end, l)
}

// bounds returns where the text starts once leading blank lines are dropped
// (at a line start, keeping its indentation) and where it ends once trailing
// whitespace is dropped.
func (d *mdDoc) bounds() (s, n int) {
	n = len(d.md)
	for n > 0 && isSpace(d.md[n-1]) {
		n--
	}
	if i := strings.LastIndexByte(d.md[:leadingSpace(d.md, 0)], '\n'); i >= 0 && n > 0 {
		s = i + 1
	}
	if s > n {
		s = n
	}
	return s, n
}

// lineAt returns the index of the line holding byte offset pos.
func (d *mdDoc) lineAt(pos int) int {
	return sort.Search(len(d.lines), func(i int) bool { return d.lines[i].start > pos }) - 1
}

// chunk is one piece of a split: prefix + md[start:end] + suffix.
type chunk struct {
	prefix     string // the reopened fence line and a newline, or ""
	start, end int
	suffix     string // a newline and the closing fence, or ""
}

func (c chunk) text(md string) string { return c.prefix + md[c.start:c.end] + c.suffix }

// Kinds of cut, worst first.
const (
	cutEmptyBlock = iota // leaves an empty code block on one side
	cutCluster           // inside a cluster of combining marks or joined emoji
	cutWord              // between two runes of a word
	cutSpace             // at a space within a line
	cutLine              // at a line end
	cutCodePara          // at a blank line inside a code block
	cutPara              // between paragraphs or blocks outside code
	cutEnd               // the rest of the document fits
	numCuts
)

// split cuts the whole document into chunks of at most limit.
func (d *mdDoc) split(limit int) []chunk {
	md := d.md
	s, n := d.bounds()
	var out []chunk
	for s < n {
		c, next, ok := d.cutAt(s, n, limit, true)
		if !ok {
			c, next, ok = d.cutAt(s, n, limit, false)
		}
		if !ok {
			if isSpace(md[s]) { // indentation longer than max
				s = leadingSpace(md, s)
				continue
			}
			// A rune longer than max: it goes alone, over the limit.
			_, size := utf8.DecodeRuneInString(md[s:])
			c, next = chunk{start: s, end: s + size}, leadingSpace(md, s+size)
		}
		out = append(out, c)
		s = next
	}
	return out
}

// cutAt finds the chunk starting at s, the best cut that keeps it within
// limit, and where the next chunk starts. With fences, code blocks are
// closed and reopened and no cut falls inside a fence line; without, cuts go
// anywhere between runes and nothing is added. ok is false when no cut fits.
func (d *mdDoc) cutAt(s, n, limit int, fences bool) (c chunk, next int, ok bool) {
	md, u := d.md, d.u
	li := d.lineAt(s)
	prefix := ""
	if fences {
		l := &d.lines[li]
		if l.isFence() && s > l.start {
			// An earlier hard cut fell inside this fence line: the block
			// cannot be kept whole, so this chunk is a hard cut too.
			return chunk{}, 0, false
		}
		if l.kind == lineCode || l.kind == lineClose {
			prefix = l.fence.open + "\n"
		}
	}
	budget := limit - Measure(prefix, u)
	type cand struct {
		end, next int
		suffix    string
		ok        bool
	}
	var best [numCuts]cand
	top := -1 // the best kind found so far: worse ones need not be tried
	consider := func(kind, end, next int, l *mdLine, m int) {
		suffix := ""
		if fences && l.codeAfter() {
			suffix = l.fence.suffix
		}
		if m+len(suffix) <= budget {
			best[kind] = cand{end, next, suffix, true}
			if kind > top {
				top = kind
			}
		}
	}
	// A mid-line cut must leave neither the chunk's last line nor the next
	// chunk's first line reading as a fence. The last line is the start of
	// the line, or of the chunk when it started on that line.
	headLine, head := &d.lines[li], d.lines[li].sig
	if l := &d.lines[li]; s > l.start {
		head = d.sigAt(s, min(l.end, s+4*max(budget, 0)+8))
	}
	midLineOK := func(end, next int, l *mdLine) bool {
		if !fences {
			return true
		}
		if l.isFence() || d.restReads(next, l) {
			return false
		}
		g := l.sig
		if l == headLine {
			g = head
		}
		return !g.reads(end, l)
	}
	m := 0 // Measure(md[s:pos])
	pos := s
	prev := rune(-1)
	for pos < n && m <= budget {
		if isSpace(md[pos]) {
			q, nl, lastNL := pos, 0, -1
			for ; q < n && isSpace(md[q]); q++ {
				if md[q] == '\n' {
					nl, lastNL = nl+1, q
				}
			}
			if pos > s {
				lA := &d.lines[li]
				if nl == 0 {
					if top <= cutSpace && midLineOK(pos, q, lA) {
						consider(cutSpace, pos, q, lA, m)
					}
				} else {
					consider(d.lineCut(lA, &d.lines[li+nl], nl, fences), pos, lastNL+1, lA, m)
				}
			}
			m += q - pos
			pos, li, prev = q, li+nl, ' '
			continue
		}
		r, size := utf8.DecodeRuneInString(md[pos:])
		if pos > s && prev != ' ' && top <= cutWord {
			if l := &d.lines[li]; midLineOK(pos, pos, l) {
				kind := cutWord
				if prev == '\u200d' || joins(r) {
					kind = cutCluster
				}
				consider(kind, pos, pos, l, m)
			}
		}
		m += runeLen(r, size, u)
		pos += size
		prev = r
	}
	if pos >= n && m <= budget {
		// The document's own end: an unclosed block stays unclosed.
		best[cutEnd] = cand{end: n, next: n, ok: true}
	}
	for k := numCuts - 1; k >= 0; k-- {
		if b := best[k]; b.ok {
			return chunk{prefix: prefix, start: s, end: b.end, suffix: b.suffix}, b.next, true
		}
	}
	return chunk{}, 0, false
}

// lineCut classifies a cut between line a and line b, nl newlines apart.
func (d *mdDoc) lineCut(a, b *mdLine, nl int, fences bool) int {
	switch {
	case !fences:
		if nl >= 2 {
			return cutPara
		}
		return cutLine
	case a.codeAfter():
		if a.kind == lineOpen || b.kind == lineClose {
			return cutEmptyBlock
		}
		if nl >= 2 {
			return cutCodePara
		}
		return cutLine
	case nl >= 2 || a.kind == lineClose || b.kind == lineOpen || b.heading:
		return cutPara
	}
	return cutLine
}

// tailAt finds where the tail of md[:n] starts so that it fits in budget
// with the fence prefix it needs, preferring line starts. s0 is the first
// line worth showing.
func (d *mdDoc) tailAt(s0, n, budget int, fences bool) (prefix string, t int, ok bool) {
	md, u := d.md, d.u
	if budget <= 0 {
		return "", 0, false
	}
	reopen := func(l *mdLine) string {
		if fences && l.kind == lineCode {
			return l.fence.open + "\n"
		}
		return ""
	}
	last := d.lineAt(n - 1)
	m, segEnd := 0, n
	for i := last; i >= 0 && d.lines[i].start >= s0; i-- {
		l := &d.lines[i]
		m += Measure(md[l.start:segEnd], u)
		segEnd = l.start
		if m > budget {
			break
		}
		if l.blank || (fences && l.kind == lineClose) {
			continue
		}
		if p := reopen(l); m+Measure(p, u) <= budget {
			prefix, t, ok = p, l.start, true
		}
	}
	if ok {
		return prefix, t, true
	}

	// Not even the last line fits whole: start inside it, or inside the
	// last line of code when the document ends with a closing fence.
	li := last
	if fences && d.lines[li].kind == lineClose {
		for li--; li > 0 && d.lines[li].blank && d.lines[li].kind == lineCode; li-- {
		}
	}
	l := &d.lines[li]
	from, to := max(l.start, s0), min(l.end, n)
	if (fences && l.isFence()) || from >= to {
		return "", 0, false
	}
	prefix = reopen(l)
	budget -= Measure(prefix, u)
	total := Measure(md[from:n], u)
	var first [numCuts]int
	for pos, pm, prev := from, 0, rune(-1); pos < to; {
		r, size := utf8.DecodeRuneInString(md[pos:])
		if pos > from && total-pm <= budget && !isSpace(md[pos]) &&
			(!fences || !d.restReads(pos, l)) {
			kind := cutWord
			switch {
			case prev == ' ':
				kind = cutSpace
			case prev == '\u200d' || joins(r):
				kind = cutCluster
			}
			if first[kind] == 0 {
				first[kind] = pos
			}
		}
		pm += runeLen(r, size, u)
		pos += size
		prev = r
		if r < utf8.RuneSelf && isSpace(byte(r)) {
			prev = ' '
		}
	}
	for k := numCuts - 1; k >= 0; k-- {
		if first[k] > 0 {
			return prefix, first[k], true
		}
	}
	return "", 0, false
}

// isHeading reports whether line is an ATX heading.
func isHeading(line string) bool {
	i := indent(line)
	if i > 3 {
		return false
	}
	j := i
	for j < len(line) && line[j] == '#' {
		j++
	}
	return j > i && j-i <= 6 && (j == len(line) || line[j] == ' ' || line[j] == '\t')
}

// joins reports whether r attaches to the rune before it: combining marks,
// the zero-width joiner, variation selectors, emoji skin tones and tags.
func joins(r rune) bool {
	switch {
	case r == '\u200d', r >= 0xFE00 && r <= 0xFE0F, r >= 0x1F3FB && r <= 0x1F3FF,
		r >= 0xE0020 && r <= 0xE007F, r >= 0xE0100 && r <= 0xE01EF:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me)
}

const spaceChars = " \t\r\n\f\v"

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'
}

func isBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isSpace(s[i]) {
			return false
		}
	}
	return true
}

// indent counts the leading spaces of line.
func indent(line string) int {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	return i
}

// leadingSpace returns the offset of the first non-space byte at or after i.
func leadingSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}
