package telegram

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
)

var update = flag.Bool("update", false, "rewrite testdata/render/*.golden from the current output")

// TestRenderGolden renders each testdata/render/NAME.md and compares the
// HTML with NAME.golden and the plain text with NAME.plain.golden, byte for
// byte. Regenerate with go test -run TestRenderGolden -update.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/render/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden inputs in testdata/render")
	}
	for _, file := range files {
		base := strings.TrimSuffix(file, ".md")
		t.Run(filepath.Base(base), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			md := string(src)
			for _, c := range []struct {
				path   string
				render func(string) string
			}{
				{base + ".golden", RenderHTML},
				{base + ".plain.golden", PlainText},
			} {
				got := c.render(md)
				if *update {
					if err := os.WriteFile(c.path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(c.path)
				if err != nil {
					t.Fatalf("%v (run with -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("%s differs:\n%s", c.path, firstDiff(string(want), got))
				}
			}
			checkRendered(t, md)
		})
	}
}

// firstDiff shows where got first departs from want.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// checkRendered checks the properties every rendering must have.
func checkRendered(t *testing.T, md string) {
	t.Helper()
	limit := core.Measure(md, core.UTF16) + MaxGrowth
	h := RenderHTML(md)
	if err := validateHTML(h); err != nil {
		t.Errorf("RenderHTML(%q) = %q: %v", clip(md), clip(h), err)
	}
	if n := VisibleLength(h); n > limit {
		t.Errorf("RenderHTML(%q): visible length %d > %d", clip(md), n, limit)
	}
	p := PlainText(md)
	if !utf8.ValidString(p) {
		t.Errorf("PlainText(%q) is not valid UTF-8", clip(md))
	}
	if n := core.Measure(p, core.UTF16); n > limit {
		t.Errorf("PlainText(%q): length %d > %d", clip(md), n, limit)
	}
	if strings.ContainsRune(p, '\r') || strings.ContainsRune(h, '\r') {
		t.Errorf("output for %q keeps a carriage return", clip(md))
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// validateHTML checks s against the HTML Telegram's parser accepts, and
// against the nesting its entities allow, strictly: only b, i, u, s, code,
// pre, a and blockquote; attributes only href on a (quoted) and
// class="language-…" on a code that is the whole content of a pre; no tag
// inside code or pre other than that code; code and pre inside nothing but
// a blockquote; blockquote only at the top; no tag inside itself (so no
// link in a link); every tag closed in order and none empty; text with
// '<', '>' and '&' escaped and only the references Telegram decodes.
func validateHTML(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("invalid UTF-8")
	}
	type element struct {
		name    string
		content bool // any visible text yet
		code    int  // pre only: 0 no code child, 1 open, 2 closed
	}
	var stack []*element
	markContent := func() error {
		for _, e := range stack {
			e.content = true
		}
		if len(stack) > 0 {
			if top := stack[len(stack)-1]; top.name == "pre" && top.code > 0 {
				return errors.New("text in a pre beside its code")
			}
		}
		return nil
	}
	for i := 0; i < len(s); {
		switch s[i] {
		case '<':
			j := strings.IndexByte(s[i:], '>')
			if j < 0 {
				return fmt.Errorf("unclosed tag at %d", i)
			}
			tagText := s[i+1 : i+j]
			at := i
			i += j + 1
			if name, ok := strings.CutPrefix(tagText, "/"); ok {
				if len(stack) == 0 || stack[len(stack)-1].name != name {
					return fmt.Errorf("unmatched </%s> at %d", name, at)
				}
				e := stack[len(stack)-1]
				if !e.content {
					return fmt.Errorf("empty <%s> at %d", name, at)
				}
				stack = stack[:len(stack)-1]
				if name == "code" && len(stack) > 0 && stack[len(stack)-1].name == "pre" {
					stack[len(stack)-1].code = 2
				}
				continue
			}
			name, attrs, _ := strings.Cut(tagText, " ")
			for _, e := range stack {
				if e.name == name {
					return fmt.Errorf("<%s> inside itself at %d", name, at)
				}
			}
			var parent *element
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			inCode := false
			for _, e := range stack {
				if e.name == "code" || e.name == "pre" {
					inCode = true
				}
			}
			switch name {
			case "b", "i", "u", "s", "blockquote", "pre":
				if attrs != "" {
					return fmt.Errorf("<%s> with attributes %q at %d", name, attrs, at)
				}
			case "a":
				v, ok := strings.CutPrefix(attrs, `href="`)
				if !ok || !strings.HasSuffix(v, `"`) || len(v) < 2 {
					return fmt.Errorf("bad link attributes %q at %d", attrs, at)
				}
				if err := validateText(v[:len(v)-1], true); err != nil {
					return fmt.Errorf("href at %d: %v", at, err)
				}
			case "code":
				if attrs != "" {
					lang, ok := strings.CutPrefix(attrs, `class="language-`)
					if !ok || !strings.HasSuffix(lang, `"`) || !validLanguage(lang[:len(lang)-1]) {
						return fmt.Errorf("bad code attributes %q at %d", attrs, at)
					}
					if parent == nil || parent.name != "pre" || parent.content || parent.code != 0 {
						return fmt.Errorf("code with a language outside a pre of its own at %d", at)
					}
				}
			default:
				return fmt.Errorf("unsupported tag <%s> at %d", name, at)
			}
			switch {
			case name == "code" && parent != nil && parent.name == "pre":
				if parent.content || parent.code != 0 {
					return fmt.Errorf("code inside a pre with other content at %d", at)
				}
				parent.code = 1
			case inCode:
				return fmt.Errorf("<%s> inside code at %d", name, at)
			case name == "blockquote" && len(stack) > 0:
				return fmt.Errorf("blockquote inside <%s> at %d", parent.name, at)
			case name == "code" || name == "pre":
				for _, e := range stack {
					if e.name != "blockquote" {
						return fmt.Errorf("<%s> inside <%s> at %d", name, e.name, at)
					}
				}
			}
			stack = append(stack, &element{name: name})
		case '&', '>':
			j := strings.IndexByte(s[i:], '<')
			if j < 0 {
				j = len(s) - i
			}
			if err := validateText(s[i:i+j], false); err != nil {
				return fmt.Errorf("text at %d: %v", i, err)
			}
			if err := markContent(); err != nil {
				return err
			}
			i += j
		default:
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			if err := markContent(); err != nil {
				return err
			}
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("<%s> not closed", stack[len(stack)-1].name)
	}
	return nil
}

// validateText checks escaped text: no raw '<' or '>', '&' only in the
// references Telegram decodes, and in attributes no raw '"'.
func validateText(s string, attr bool) error {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '<', '>':
			return fmt.Errorf("raw %q", s[i])
		case '"':
			if attr {
				return errors.New(`raw '"' in an attribute`)
			}
		case '&':
			ok := false
			for _, e := range []string{"&lt;", "&gt;", "&amp;", "&quot;"} {
				if strings.HasPrefix(s[i:], e) {
					ok = true
				}
			}
			if !ok {
				return fmt.Errorf("unescaped '&' in %q", clip(s[i:]))
			}
		}
	}
	return nil
}

func TestValidateHTML(t *testing.T) {
	good := []string{
		"",
		"plain &lt;text&gt; &amp; &quot;",
		"<b>bold <i>both</i></b> <code>x&lt;y</code>",
		`<a href="https://x.y/?a=1&amp;b=&quot;2&quot;"><b>link</b></a>`,
		`<pre><code class="language-go">x</code></pre>`,
		"<blockquote>q <b>b</b>\n<pre>code</pre></blockquote>",
	}
	for _, s := range good {
		if err := validateHTML(s); err != nil {
			t.Errorf("validateHTML(%q) = %v, want nil", s, err)
		}
	}
	bad := []string{
		"a < b",
		"a > b",
		"AT&T",
		"<b>open",
		"</b>",
		"<b><i>x</b></i>",
		"<b><b>x</b></b>",
		"<span>x</span>",
		"<b></b>",
		`<a href="x"><a href="y">z</a></a>`,
		`<a href='x'>z</a>`,
		`<a href="x"y">z</a>`,
		"<code><b>x</b></code>",
		"<b><code>x</code></b>",
		"<pre>x<code>y</code></pre>",
		`<code class="language-go">x</code>`,
		`<pre><code class="language-go">x</code>y</pre>`,
		"<blockquote><blockquote>x</blockquote></blockquote>",
		"<b><blockquote>x</blockquote></b>",
		"\xff",
	}
	for _, s := range bad {
		if err := validateHTML(s); err == nil {
			t.Errorf("validateHTML(%q) = nil, want an error", s)
		}
	}
}

func TestVisibleLength(t *testing.T) {
	tests := []struct {
		html string
		want int
	}{
		{"", 0},
		{"abc", 3},
		{"a\nb", 3},
		{"<b>abc</b>", 3},
		{"<b><i>a</i></b>b<code>c</code>", 3},
		{`<a href="https://x.y/a>b">text</a>`, 4},
		{`<pre><code class="language-go">x := 1</code></pre>`, 6},
		{"&lt;&gt;&amp;&quot;", 4},
		{"&lt&gt&amp&quot", 4}, // Telegram does not need the semicolon
		{"&#65;&#x41;", 2},
		{"&#128512;", 2},     // U+1F600, outside the BMP
		{"&#X41;", 6},        // only a lowercase x is hexadecimal
		{"&#0;", 4},          // not a character: shown as written
		{"&#1114111;", 10},   // U+10FFFF is refused too
		{"&#0000065;", 1},    // nine bytes before the semicolon
		{"&#00000065;", 11},  // ten bytes or more: shown as written
		{"&nbsp;&copy;", 12}, // only four named references are known
		{"&", 1},             // a lone ampersand is text
		{"AT&T", 4},
		{"😀", 2},
		{"𝔄b", 3},
		{"e\u0301", 2}, // e and a combining acute accent
		{"日本語", 3},
		{"👍🏽", 4},
		{"a<b", 3}, // an unclosed tag counts as text, never less
		{"\xff", 1},
	}
	for _, tt := range tests {
		if got := VisibleLength(tt.html); got != tt.want {
			t.Errorf("VisibleLength(%q) = %d, want %d", tt.html, got, tt.want)
		}
	}
}

// TestVisibleLengthMatchesText checks VisibleLength against the text it
// is meant to count, for rendered documents: the escaped text, tags
// removed, measured in UTF-16.
func TestVisibleLengthMatchesText(t *testing.T) {
	for _, md := range []string{
		"**a < b** & `c > d` [\"q\"](https://x.y/?a&b)",
		"# 😀 heading\n\n- 𝔄 item\n\n```go\nif a<b {}\n```",
		"| a | b |\n|---|---|\n| 日本 | &amp; |",
	} {
		h := RenderHTML(md)
		var text strings.Builder
		for i := 0; i < len(h); {
			if h[i] == '<' {
				i += strings.IndexByte(h[i:], '>') + 1
				continue
			}
			text.WriteByte(h[i])
			i++
		}
		plain := htmlUnescaper.Replace(text.String())
		if got, want := VisibleLength(h), core.Measure(plain, core.UTF16); got != want {
			t.Errorf("VisibleLength(%q) = %d, want %d (%q)", h, got, want, plain)
		}
	}
}

func TestRenderHTML(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"empty", "", ""},
		{"blank", " \n\n\t\n", ""},
		{"escaping", `a < b && c > "d"`, `a &lt; b &amp;&amp; c &gt; "d"`},
		{"bold and italic", "**b** *i* _j_ ~~s~~", "<b>b</b> <i>i</i> <i>j</i> <s>s</s>"},
		{"bold italic", "***x***", "<i><b>x</b></i>"},
		{"bold in bold", "**a **b** c**", "<b>a b c</b>"},
		{"code in bold", "**a `c` d**", "<b>a </b><code>c</code><b> d</b>"},
		{"code escaping", "`<a href=\"x\">&amp;</a>`", "<code>&lt;a href=\"x\"&gt;&amp;amp;&lt;/a&gt;</code>"},
		{"code in link", "[`go` doc](https://go.dev)", `<a href="https://go.dev">go doc</a>`},
		{"image in link", "[![badge](https://b/x.svg)](https://ci)", `<a href="https://ci">badge</a>`},
		{"javascript", "[click](javascript:alert(1))", "click"},
		{"data", "[x](data:text/html;base64,AAAA)", "x"},
		{"relative", "[readme](README.md)", "readme"},
		{"no host", "[x](http://)", "x"},
		{"mailto", "[mail](mailto:a@b.c)", `<a href="mailto:a@b.c">mail</a>`},
		{"tg", "[me](tg://user?id=1)", `<a href="tg://user?id=1">me</a>`},
		{"href escaping", `[q](https://x.y/?a=1&b=2 "t")`, `<a href="https://x.y/?a=1&amp;b=2">q</a>`},
		{"href encoding", "[q](<https://x.y/a b\"c>)", `<a href="https://x.y/a%20b%22c">q</a>`},
		{"empty link text", "[](https://x.y)", `<a href="https://x.y">https://x.y</a>`},
		{"image", "![a cat](https://c/at.png)", `<a href="https://c/at.png">a cat</a>`},
		{"raw html", "<b>x</b>", "&lt;b&gt;x&lt;/b&gt;"},
		{"entities", "&copy; &#x1F600; &lt;", "© 😀 &lt;"},
		{"heading with code", "## Use `go test`", "<b>Use </b><code>go test</code>"},
		{"empty heading", "#\n\ntext", "text"},
		{"nested quote", "> a\n>\n> > b", "<blockquote>a\n\nb</blockquote>"},
		{"hard breaks", "a  \nb\\\nc\nd", "a\nb\nc\nd"},
		{"rule", "a\n\n---\n\nb\n***\nc", "a\n\n———\n\nb\n———\nc"},
		{"language", "```c++ extra\nx\n```", `<pre><code class="language-c++">x</code></pre>`},
		{"odd language", "```{.py}\nx\n```", "<pre>x</pre>"},
		{"empty fence", "```\n```", ""},
		{"unclosed fence", "```sh\necho <x>", `<pre><code class="language-sh">echo &lt;x&gt;</code></pre>`},
		{"tight blocks", "# T\ntext\n- a\n- b", "<b>T</b>\ntext\n• a\n• b"},
		{"task list", "- [ ] todo\n- [x] done", "☐ todo\n☑ done"},
		{"ordered", "3) c\n3) d", "3) c\n4) d"},
		{"crlf", "a\r\nb\r\n\r\nc", "a\nb\n\nc"},
		{"control", "a\x00b\x01c\fd", "a\uFFFDb\uFFFDc d"},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := RenderHTML(tt.md)
			if got != tt.want {
				t.Errorf("RenderHTML(%q)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkRendered(t, tt.md)
		})
	}
}

func TestPlainText(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"markup dropped", "**b** *i* `c<d>` ~~s~~", "b i c<d> s"},
		{"link", "[docs](https://go.dev/doc)", "docs (https://go.dev/doc)"},
		{"link same as text", "[https://go.dev](https://go.dev)", "https://go.dev"},
		{"autolink", "<https://go.dev> www.go.dev a@b.c", "https://go.dev www.go.dev a@b.c"},
		{"mailto", "[write](mailto:a@b.c)", "write (a@b.c)"},
		{"bad link", "[x](javascript:void(0))", "x"},
		{"image", "![logo](https://x/l.png)", "logo (https://x/l.png)"},
		{"code block", "```go\nif a < b {\n\treturn\n}\n```", "if a < b {\n\treturn\n}"},
		{"list", "- a\n  - b\n\n    more\n1. c", "• a\n  ◦ b\n\n    more\n1. c"},
		{"quote", "> a\n> > b\n\nc", "> a\n> > b\n\nc"},
		{"raw html", "<div>x</div>", "<div>x</div>"},
		{"heading", "# Title\nbody", "Title\nbody"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PlainText(tt.md); got != tt.want {
				t.Errorf("PlainText(%q)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkRendered(t, tt.md)
		})
	}
}

func TestDisplayWidth(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"abc", 3},
		{"日本", 4},
		{"ｆｕｌｌ", 8},
		{"e\u0301", 1},
		{"😀", 2},
		{"👍🏽", 2},
		{"👨‍👩‍👧", 2},
		{"❤️", 2},
		{"🇺🇦", 2},
	}
	for _, tt := range tests {
		if got := displayWidth(tt.s); got != tt.want {
			t.Errorf("displayWidth(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestRenderGrowth feeds the renderings that add text in the worst shapes
// there are and checks that the output keeps within MaxGrowth of the
// source, and still shows the content.
func TestRenderGrowth(t *testing.T) {
	var wide strings.Builder
	wide.WriteString("|a|b|\n|-|-|\n|" + strings.Repeat("w", 200) + "|x|\n")
	for range 300 {
		wide.WriteString("|a|b|\n")
	}
	var narrowTable strings.Builder
	narrowTable.WriteString("|k|v|\n|-|-|\n")
	for i := range 300 {
		fmt.Fprintf(&narrowTable, "|%s|%d|\n", strings.Repeat("k", i%7), i)
	}
	tests := []struct {
		name, md, contains string
	}{
		{"renumbered list", strings.Repeat("1. x\n", 2000), "x"},
		{"renumbered nested", strings.Repeat("1. x\n   - y\n", 1000), "y"},
		{"numbers from a start", "99999999. a\n" + strings.Repeat("1. b\n", 1500), "b"},
		{"tab nesting", strings.Repeat("-\ta\n\t-\tb\n\t\t-\tc\n", 300), "c"},
		{"lazy lines", "- a\n" + strings.Repeat("    - b\nlazy\n", 500), "lazy"},
		{"deep nesting", strings.Repeat(" ", 0) + nested(40), "x39"},
		{"wide table", wide.String(), "wwww"},
		{"narrow table", narrowTable.String(), "kkk"},
		{"rules", strings.Repeat("---\n", 1000), "———"},
		{"code padding", strings.Repeat(">\t\tcode\n", 500), "code"},
		{"plain links", strings.Repeat("[a](http://b.c) ", 500), "a"},
		{"reference links", strings.Repeat("[a][r] ", 500) + "\n\n[r]: http://example.com/long/url/path", "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkRendered(t, tt.md)
			if h := RenderHTML(tt.md); !strings.Contains(h, tt.contains) {
				t.Errorf("RenderHTML lost %q: %q", tt.contains, clip(h))
			}
			if p := PlainText(tt.md); !strings.Contains(p, tt.contains) {
				t.Errorf("PlainText lost %q: %q", tt.contains, clip(p))
			}
		})
	}
}

// nested is a list nested n deep, each level indented two spaces more.
func nested(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s- x%d\n", strings.Repeat("  ", i), i)
	}
	return b.String()
}

// TestRenderSplitChunks is the adapter's contract: markdown split at
// 4096-MaxGrowth renders every chunk within Telegram's 4096.
func TestRenderSplitChunks(t *testing.T) {
	src, err := os.ReadFile("testdata/render/long.md")
	if err != nil {
		t.Fatal(err)
	}
	md := strings.Repeat(string(src)+"\n\n", 4)
	chunks := core.Split(md, 4096-MaxGrowth, core.UTF16)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks, want the document split", len(chunks))
	}
	for i, c := range chunks {
		h := RenderHTML(c)
		if err := validateHTML(h); err != nil {
			t.Errorf("chunk %d: %v", i, err)
		}
		if n := VisibleLength(h); n > 4096 {
			t.Errorf("chunk %d: visible length %d > 4096", i, n)
		}
		if n := core.Measure(PlainText(c), core.UTF16); n > 4096 {
			t.Errorf("chunk %d: plain length %d > 4096", i, n)
		}
	}
}

func TestRenderConcurrent(t *testing.T) {
	src, err := os.ReadFile("testdata/render/long.md")
	if err != nil {
		t.Fatal(err)
	}
	md := string(src)
	want := RenderHTML(md)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				if got := RenderHTML(md); got != want {
					t.Error("RenderHTML is not deterministic under concurrency")
					return
				}
				PlainText(md)
			}
		})
	}
	wg.Wait()
}

// fuzzSeeds are the golden inputs and a few shapes the fuzzer should start
// from.
func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/render/*.md")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"", "**a `b` c**", "[a ![b](http://c)](http://d)", "> > - ```\n> > x", "1. a\n1. b\n   1. c",
		"|a|b|\n|-|:-:|\n|日本|😀|", "<b>&amp;</b>", "- [ ] x\n\t- [x] y", "***a**b*", "~~a **b~~ c**",
		"www.example.com/a?b=<c>", "&#55296; &#x10FFFF; &#0;", "a\r\nb\rc", "```\n<pre>\n```",
	} {
		f.Add(s)
	}
}

// FuzzRenderHTML checks that whatever the markdown, the HTML is valid for
// Telegram and within MaxGrowth of the source's length.
func FuzzRenderHTML(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			t.Skip()
		}
		// render, not RenderHTML: without renderSafe's recover, panics show.
		// An allowance of 0 checks the length account strictly.
		for _, allow := range []int{MaxGrowth, 0} {
			h := render(md, false, allow)
			if err := validateHTML(h); err != nil {
				t.Fatalf("RenderHTML(%q) = %q: %v", md, h, err)
			}
			if n, m := VisibleLength(h), core.Measure(md, core.UTF16); n > m+allow {
				t.Fatalf("RenderHTML(%q) = %q: visible length %d > %d + %d", md, h, n, m, allow)
			}
		}
	})
}

// FuzzPlainText checks that the plain text is valid UTF-8, within
// MaxGrowth of the source's length, and adds no markup.
func FuzzPlainText(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			t.Skip()
		}
		for _, allow := range []int{MaxGrowth, 0} {
			p := render(md, true, allow)
			if !utf8.ValidString(p) {
				t.Fatalf("PlainText(%q) is not valid UTF-8", md)
			}
			if n, m := core.Measure(p, core.UTF16), core.Measure(md, core.UTF16); n > m+allow {
				t.Fatalf("PlainText(%q) = %q: length %d > %d + %d", md, p, n, m, allow)
			}
			if !strings.ContainsAny(md, "<&") && strings.Contains(p, "<") {
				t.Fatalf("PlainText(%q) = %q adds markup", md, p)
			}
		}
	})
}
