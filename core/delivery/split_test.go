package delivery

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

func TestMeasure(t *testing.T) {
	tests := []struct {
		s                   string
		bytes, runes, utf16 int
	}{
		{"", 0, 0, 0},
		{"abc", 3, 3, 3},
		{"héllo", 6, 5, 5},
		{"…", 3, 1, 1},
		{"😀", 4, 1, 2},
		{"a😀b", 6, 3, 4},
		{"👩\u200d💻", 11, 3, 5},
		{"\xff\xfe", 2, 2, 2}, // invalid bytes count one each
	}
	for _, tt := range tests {
		for u, want := range map[core.LengthUnit]int{core.Bytes: tt.bytes, core.Runes: tt.runes, core.UTF16: tt.utf16} {
			if got := Measure(tt.s, u); got != want {
				t.Errorf("Measure(%q, %d) = %d, want %d", tt.s, u, got, want)
			}
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name string
		md   string
		max  int
		u    core.LengthUnit
		want []string
	}{
		{"fits unchanged", "short\n\n", 100, core.Bytes, []string{"short\n\n"}},
		{"no limit", strings.Repeat("x", 10000), 0, core.Bytes, []string{strings.Repeat("x", 10000)}},
		{"empty", "", 5, core.Bytes, []string{""}},
		{"paragraphs", "aaa bbb\n\nccc ddd\n\neee", 10, core.Bytes,
			[]string{"aaa bbb", "ccc ddd", "eee"}},
		{"short paragraph stays whole", "ab\n\ncd ef gh", 9, core.Bytes,
			[]string{"ab", "cd ef gh"}},
		{"lines before spaces", "one two\nthree four\nfive", 15, core.Bytes,
			[]string{"one two", "three four\nfive"}},
		{"long line at spaces", "the quick brown fox jumps over the lazy dog", 10, core.Bytes,
			[]string{"the quick", "brown fox", "jumps over", "the lazy", "dog"}},
		{"headings start paragraphs", "# Title\nsome text here\n# Next\nmore", 20, core.Bytes,
			[]string{"# Title", "some text here", "# Next\nmore"}},
		{"blank lines and trailing space dropped", "\n\n  \nabc def\n\n\n", 5, core.Bytes,
			[]string{"abc", "def"}},
		{"indentation kept", "- item one\n  continued here", 16, core.Bytes,
			[]string{"- item one", "  continued here"}},
		{"crlf", "one\r\ntwo\r\n\r\nthree", 8, core.Bytes,
			[]string{"one\r\ntwo", "three"}},
		{"code block spanning chunks", "intro\n\n```go\na := 1\nb := 2\nc := 3\n```\n\nouter", 24, core.Bytes,
			[]string{"intro", "```go\na := 1\nb := 2\n```", "```go\nc := 3\n```\n\nouter"}},
		{"code cut at blank lines", "```go\nfunc a() {}\n\nfunc b() {}\n\nfunc c() {}\n```", 30, core.Bytes,
			[]string{"```go\nfunc a() {}\n```", "```go\nfunc b() {}\n```", "```go\nfunc c() {}\n```"}},
		{"nested-looking fences", "````md\n```go\nx := 1\n```\n````\nafter", 24, core.Bytes,
			[]string{"````md\n```go\nx := 1\n````", "````md\n```\n````\nafter"}},
		{"tilde fence with info string", "~~~ python title\nprint(1)\nprint(2)\n~~~", 30, core.Bytes,
			[]string{"~~~ python title\nprint(1)\n~~~", "~~~ python title\nprint(2)\n~~~"}},
		{"indented fence reopened as written", "  ```sh\n  ls\n  pwd\n  ```", 19, core.Bytes,
			[]string{"  ```sh\n  ls\n```", "  ```sh\n  pwd\n  ```"}},
		{"unclosed block stays unclosed", "```\na\nb\nc\nd", 9, core.Bytes,
			[]string{"```\na\n```", "```\nb\nc\nd"}},
		{"only whitespace", "\n\n  \n", 2, core.Bytes, []string{""}},
		{"emoji in UTF-16", "😀😀😀😀😀", 4, core.UTF16, []string{"😀😀", "😀😀", "😀"}},
		{"emoji never halved", "😀😀😀", 3, core.UTF16, []string{"😀", "😀", "😀"}},
		{"emoji in runes", "😀 😀 😀", 3, core.Runes, []string{"😀 😀", "😀"}},
		{"joined emoji kept together", "👩\u200d💻👩\u200d💻", 6, core.UTF16,
			[]string{"👩\u200d💻", "👩\u200d💻"}},
		{"combining mark kept with its letter", "abcde\u0301fgh", 5, core.Runes,
			[]string{"abcd", "e\u0301fgh"}},
		{"tiny max cuts words", "abcdefghij", 3, core.Bytes, []string{"abc", "def", "ghi", "j"}},
		{"rune longer than max goes alone", "a😀b", 2, core.Bytes, []string{"a", "😀", "b"}},
		// A fence line longer than max cannot be kept: plain hard cuts,
		// no fences added, nothing lost, every chunk within max.
		{"max smaller than a fence line", "```python\nprint(1)\nprint(2)\n```", 8, core.Bytes,
			[]string{"```pytho", "n", "print(1)", "print(2)", "```"}},
		{"no chunk starts with a fence by accident", "xx ```yy zz", 8, core.Bytes,
			[]string{"xx ```yy", "zz"}},
		{"no chunk ends with a fence by accident", "```a`b c", 5, core.Bytes,
			[]string{"```a`", "b c"}},
		{"no code line cut into a closing fence", "```\necho ``` x\n```", 13, core.Bytes,
			[]string{"```\necho\n```", "```\n``` x\n```"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.md, tt.max, tt.u)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Split(%q, %d)\n got %q\nwant %q", tt.md, tt.max, got, tt.want)
			}
			checkSplit(t, tt.md, tt.max, tt.u)
		})
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		md     string
		max    int
		u      core.LengthUnit
		marker string
		want   string
	}{
		{"fits unchanged", "a\nb\n", 10, core.Bytes, "…", "a\nb\n"},
		{"no limit", "a\nb", 0, core.Bytes, "…", "a\nb"},
		{"only whitespace too long", "hello\n\n\n\n\n\n\n\n", 6, core.Bytes, "…", "hello"},
		{"whole lines", "line1\nline2\nline3", 13, core.Bytes, "…", "…\nline3"},
		{"as many lines as fit", "line1\nline2\nline3", 15, core.Bytes, "…", "…\nline2\nline3"},
		{"blank lines skipped", "line1\n\n\nline2", 10, core.Bytes, "…", "…\nline2"},
		{"long last line starts at a word", "p\nthe quick brown fox", 14, core.Bytes, "…", "…\nbrown fox"},
		{"code reopened", "intro\n```go\nl1\nl2\nl3", 15, core.Bytes, "…", "…\n```go\nl2\nl3"},
		{"closed code reopened", "intro\n```go\nl1\nl2\nl3\n```\nafter", 22, core.Bytes, "…",
			"…\n```go\nl3\n```\nafter"},
		{"tail after a block needs no fence", "```\ncode\n```\nafter", 10, core.Bytes, "…", "…\nafter"},
		{"long code line", "```\n" + strings.Repeat("x ", 20) + "\n```", 16, core.Bytes, "…",
			"…\n```\nx x \n```"},
		{"emoji in UTF-16", "a\n😀😀😀😀", 6, core.UTF16, "…", "…\n😀😀"},
		{"empty marker", "line1\nline2", 6, core.Bytes, "", "line2"},
		{"marker dropped when max is tiny", "p\nthe quick brown fox", 3, core.Bytes, "…", "fox"},
		{"nothing fits", "ab😀", 1, core.UTF16, "…", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Tail(tt.md, tt.max, tt.u, tt.marker); got != tt.want {
				t.Errorf("Tail(%q, %d) = %q, want %q", tt.md, tt.max, got, tt.want)
			}
			checkTail(t, tt.md, tt.max, tt.u, tt.marker)
		})
	}
}

// TestSplitProperties checks Split and Tail on random markdown-like
// documents for many limits.
func TestSplitProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		md := randomMarkdown(rng, 1+rng.IntN(60))
		for _, max := range []int{1, 2, 3, 5, 8, 13, 16, 24, 40, 64, 100, 257, 1000} {
			for _, u := range []core.LengthUnit{core.Bytes, core.Runes, core.UTF16} {
				t.Run(fmt.Sprintf("%d/%d/%d", i, max, u), func(t *testing.T) {
					checkSplit(t, md, max, u)
					checkTail(t, md, max, u, "…")
				})
			}
		}
	}
}

var mdPieces = []string{
	"word", "another", "x", "supercalifragilisticexpialidocious", "😀", "👩\u200d💻", "e\u0301",
	"日本語", " ", " ", "  ", "\n", "\n", "\n\n", "\n\n\n", "\t", "\r\n",
	"\n```go\n", "\n```\n", "\n~~~ sh\n", "\n~~~\n", "\n````md\n", "\n````\n", "\n  ```\n",
	"```", "~~~", "`", "# ", "\n# Heading\n", "- ", "  ", "    indented\n", "a`b",
}

func randomMarkdown(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(mdPieces[rng.IntN(len(mdPieces))])
	}
	return b.String()
}

// checkSplit checks every property Split promises.
func checkSplit(tb testing.TB, md string, max int, u core.LengthUnit) {
	tb.Helper()
	got := Split(md, max, u)
	if max <= 0 || Measure(md, u) <= max {
		if len(got) != 1 || got[0] != md {
			tb.Fatalf("Split(%q, %d) = %q, want it unchanged", md, max, got)
		}
		return
	}
	d := parseDoc(md, u)
	cs := d.split(max)
	if len(cs) == 0 && isBlank(md) && len(got) == 1 && got[0] == "" {
		return
	}
	if len(cs) != len(got) || len(cs) == 0 {
		tb.Fatalf("Split(%q, %d): %d chunks, split gave %d", md, max, len(got), len(cs))
	}
	need := fenceNeed(d)
	var rebuilt strings.Builder
	prev := 0
	for i, c := range cs {
		text := got[i]
		where := fmt.Sprintf("Split(%q, %d, %d) chunk %d %q", md, max, u, i, text)
		if text != c.text(md) {
			tb.Fatalf("%s: want %q", where, c.text(md))
		}
		if c.start >= c.end || c.start < prev {
			tb.Fatalf("%s: empty or out of order (%d..%d after %d)", where, c.start, c.end, prev)
		}
		// Reconstruction: between chunks only whitespace was dropped.
		if gap := md[prev:c.start]; !isBlank(gap) {
			tb.Fatalf("%s: dropped text %q", where, gap)
		}
		rebuilt.WriteString(md[prev:c.start])
		rebuilt.WriteString(strings.TrimSuffix(strings.TrimPrefix(text, c.prefix), c.suffix))
		prev = c.end
		if n := Measure(text, u); n > max && (max >= 4 || utf8.RuneCountInString(text) != 1) {
			tb.Fatalf("%s: length %d over %d", where, n, max)
		}
		if utf8.ValidString(md) && !utf8.ValidString(text) {
			tb.Fatalf("%s: invalid UTF-8", where)
		}
		if first, _, _ := strings.Cut(text, "\n"); isBlank(first) {
			tb.Fatalf("%s: starts with a blank line", where)
		}
		if isSpace(text[len(text)-1]) {
			tb.Fatalf("%s: ends with whitespace", where)
		}
		if c.prefix != "" {
			l := &d.lines[d.lineAt(c.start)]
			if (l.kind != lineCode && l.kind != lineClose) || c.prefix != l.fence.open+"\n" {
				tb.Fatalf("%s: prefix %q outside code", where, c.prefix)
			}
		}
		if c.suffix != "" {
			l := &d.lines[d.lineAt(c.end-1)]
			if !l.codeAfter() || c.suffix != "\n"+l.fence.close {
				tb.Fatalf("%s: suffix %q outside code", where, c.suffix)
			}
		}
		if max >= need {
			checkFences(tb, where, d, c.prefix, c.start, c.end, c.suffix, i == len(cs)-1)
		}
	}
	if !isBlank(md[prev:]) {
		tb.Fatalf("Split(%q, %d): dropped the end %q", md, max, md[prev:])
	}
	rebuilt.WriteString(md[prev:])
	if rebuilt.String() != md {
		tb.Fatalf("Split(%q, %d): chunks without added fences rebuild %q", md, max, rebuilt.String())
	}
}

// fenceNeed is a max that leaves Split and Tail room to close and reopen
// every code block of d and to find a cut that does not read as a fence.
func fenceNeed(d *mdDoc) int {
	need, run := 16, 0
	for i := range d.lines {
		if l := &d.lines[i]; l.kind == lineOpen {
			need = max(need, Measure(l.fence.open, d.u)+len(l.fence.suffix)+20)
		}
	}
	for i := 0; i < len(d.md); i++ {
		if c := d.md[i]; c == '`' || c == '~' {
			j := i
			for j < len(d.md) && d.md[j] == c {
				j++
			}
			run = max(run, j-i)
			i = j
		}
	}
	return need + 2*run
}

// checkFences checks that prefix + md[start:end] + suffix, parsed on its
// own, sees code exactly where the whole document does, and ends outside
// code unless it is the end of a document that does not.
func checkFences(tb testing.TB, where string, d *mdDoc, prefix string, start, end int, suffix string, last bool) {
	tb.Helper()
	cd := parseDoc(prefix+d.md[start:end]+suffix, d.u)
	k := 0
	if prefix != "" {
		if cd.lines[0].kind != lineOpen {
			tb.Fatalf("%s: prefix does not open a block", where)
		}
		k++
	}
	lo, hi := d.lineAt(start), d.lineAt(end-1)
	for i := lo; i <= hi; i, k = i+1, k+1 {
		if got, want := cd.lines[k].kind, d.lines[i].kind; got != want {
			tb.Fatalf("%s: line %q reads as kind %d, in the document %d", where,
				cd.md[cd.lines[k].start:cd.lines[k].end], got, want)
		}
	}
	if suffix != "" {
		if cd.lines[k].kind != lineClose {
			tb.Fatalf("%s: suffix does not close the block", where)
		}
	}
	if cd.lines[len(cd.lines)-1].codeAfter() && !(last && d.lines[hi].codeAfter()) {
		tb.Fatalf("%s: ends inside a code block", where)
	}
}

// checkTail checks every property Tail promises.
func checkTail(tb testing.TB, md string, max int, u core.LengthUnit, marker string) {
	tb.Helper()
	got := Tail(md, max, u, marker)
	where := fmt.Sprintf("Tail(%q, %d, %d, %q) = %q", md, max, u, marker, got)
	if max <= 0 || Measure(md, u) <= max {
		if got != md {
			tb.Fatalf("%s: want it unchanged", where)
		}
		return
	}
	if Measure(got, u) > max {
		tb.Fatalf("%s: length %d over %d", where, Measure(got, u), max)
	}
	if utf8.ValidString(md) && !utf8.ValidString(got) {
		tb.Fatalf("%s: invalid UTF-8", where)
	}
	d := parseDoc(md, u)
	tp := d.tail(max, marker)
	if s := tp.head + tp.prefix + md[tp.start:tp.end]; s != got {
		tb.Fatalf("%s: parts make %q", where, s)
	}
	s0, n := d.bounds()
	if tp.end != n && !(tp.start == 0 && tp.end == 0) {
		tb.Fatalf("%s: does not show the end", where)
	}
	if tp.start == tp.end {
		if got == "" && isBlank(md) {
			return
		}
		_, size := utf8.DecodeLastRuneInString(md[:n])
		if got != "" || Measure(md[n-size:n], u) <= max {
			tb.Fatalf("%s: empty though the last rune fits", where)
		}
		return
	}
	if tp.start == s0 {
		if tp.head != "" || tp.prefix != "" {
			tb.Fatalf("%s: marker though nothing was cut", where)
		}
		return
	}
	if head := marker + "\n"; marker != "" && tp.head != head && max >= Measure(head, u)+4 {
		tb.Fatalf("%s: marker dropped though max has room", where)
	}
	if isSpace(md[tp.start]) && (tp.start == 0 || md[tp.start-1] != '\n') {
		tb.Fatalf("%s: starts with whitespace", where)
	}
	l := &d.lines[d.lineAt(tp.start)]
	if tp.prefix != "" && (l.kind != lineCode || tp.prefix != l.fence.open+"\n") {
		tb.Fatalf("%s: prefix %q outside code", where, tp.prefix)
	}
	if tp.start != l.start && Measure(tp.head+tp.prefix+md[l.start:n], u) <= max {
		tb.Fatalf("%s: starts mid-line though the line fits", where)
	}
	if tp.head != "" && max >= Measure(tp.head, u)+fenceNeed(d) {
		if l.kind == lineCode && tp.prefix == "" {
			tb.Fatalf("%s: starts in code without reopening it", where)
		}
		// The marker line is plain text; the rest must read as in md.
		checkFences(tb, where, d, tp.prefix, tp.start, tp.end, "", true)
	}
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{
		"aaa bbb\n\nccc ddd\n\neee",
		"intro\n\n```go\na := 1\nb := 2\nc := 3\n```\n\nouter",
		"````md\n```go\nx := 1\n```\n````\nafter",
		"~~~ python title\nprint(1)\nprint(2)\n~~~",
		"😀😀😀😀😀 👩\u200d💻 e\u0301",
		"xx ```yy zz\n```a`b c",
		"  ```sh\n  ls\n  pwd\n  ```\n",
		"\xff\xfe invalid \xe2\x82",
	} {
		for _, max := range []int{0, 3, 8, 16, 40} {
			f.Add(s, max, uint8(max%3))
		}
	}
	f.Fuzz(func(t *testing.T, md string, max int, unit uint8) {
		if len(md) > 4096 {
			return
		}
		checkSplit(t, md, fuzzMax(max), core.LengthUnit(unit%3))
	})
}

func FuzzTail(f *testing.F) {
	for _, s := range []string{
		"line1\nline2\nline3",
		"intro\n```go\nl1\nl2\nl3",
		"intro\n```go\nl1\nl2\nl3\n```\nafter",
		"p\nthe quick brown fox",
		"😀😀😀😀😀 👩\u200d💻 e\u0301",
		"```\necho ``` x\n```",
	} {
		for _, max := range []int{0, 3, 8, 16, 40} {
			f.Add(s, max, uint8(max%3), uint8(max%4))
		}
	}
	markers := []string{"…", "", "[…]", "⋯ truncated ⋯"}
	f.Fuzz(func(t *testing.T, md string, max int, unit, marker uint8) {
		if len(md) > 4096 {
			return
		}
		checkTail(t, md, fuzzMax(max), core.LengthUnit(unit%3), markers[int(marker)%len(markers)])
	})
}

// fuzzMax folds a fuzzed limit into -1..599, mostly small.
func fuzzMax(max int) int {
	if max < -1 {
		max = -max
	}
	if max < 0 {
		return max
	}
	return max % 600
}

// benchDoc is about 100 KB of chat-like markdown: prose, lists, emoji and
// code blocks.
func benchDoc() string {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"the", "agent", "wrote", "a", "function", "that", "splits", "markdown",
		"into", "chunks", "😀", "naïve", "日本語", "`inline`", "**bold**"}
	var b strings.Builder
	for b.Len() < 100_000 {
		switch rng.IntN(4) {
		case 0:
			b.WriteString("```go\n")
			for range 5 + rng.IntN(40) {
				fmt.Fprintf(&b, "\tx := f(%d) // %s\n", rng.IntN(1000), words[rng.IntN(len(words))])
			}
			b.WriteString("```\n\n")
		case 1:
			for range 3 + rng.IntN(6) {
				fmt.Fprintf(&b, "- %s %s\n", words[rng.IntN(len(words))], words[rng.IntN(len(words))])
			}
			b.WriteString("\n")
		default:
			for range 20 + rng.IntN(120) {
				b.WriteString(words[rng.IntN(len(words))])
				b.WriteByte(' ')
			}
			b.WriteString("\n\n")
		}
	}
	return b.String()
}

func BenchmarkSplit(b *testing.B) {
	doc := benchDoc()
	for _, bc := range []struct {
		name string
		doc  string
		max  int
		u    core.LengthUnit
	}{
		{"telegram", doc, 4096, core.UTF16},
		{"slack", doc, 3500, core.Bytes},
		{"small", doc, 200, core.Runes},
		// Pathological input: mid-line cuts inside one long run of
		// backticks must not rescan it for every chunk.
		{"backtick-run", "x " + strings.Repeat("`", 100_000), 16, core.Bytes},
		{"one-word", strings.Repeat("a", 100_000), 16, core.UTF16},
	} {
		b.Run(bc.name, func(b *testing.B) {
			doc := bc.doc
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				Split(doc, bc.max, bc.u)
			}
		})
	}
}

func BenchmarkTail(b *testing.B) {
	doc := benchDoc()
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		Tail(doc, 4096, core.UTF16, "…")
	}
}
