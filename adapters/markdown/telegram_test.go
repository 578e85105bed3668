package markdown

import (
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// Tests of the Telegram HTML and plain dialects, and of VisibleLength.

func TestValidateTelegramHTML(t *testing.T) {
	good := []string{
		"",
		"plain &lt;text&gt; &amp; &quot;",
		"<b>bold <i>both</i></b> <code>x&lt;y</code>",
		`<a href="https://x.y/?a=1&amp;b=&quot;2&quot;"><b>link</b></a>`,
		`<pre><code class="language-go">x</code></pre>`,
		"<blockquote>q <b>b</b>\n<pre>code</pre></blockquote>",
	}
	for _, s := range good {
		if err := validateTelegramHTML(s); err != nil {
			t.Errorf("validateTelegramHTML(%q) = %v, want nil", s, err)
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
		if err := validateTelegramHTML(s); err == nil {
			t.Errorf("validateTelegramHTML(%q) = nil, want an error", s)
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
		h := Render(md, TelegramHTML)
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
		if got, want := VisibleLength(h), delivery.Measure(plain, core.UTF16); got != want {
			t.Errorf("VisibleLength(%q) = %d, want %d (%q)", h, got, want, plain)
		}
	}
}

func TestTelegramHTML(t *testing.T) {
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
			got := Render(tt.md, TelegramHTML)
			if got != tt.want {
				t.Errorf("Render(%q, TelegramHTML)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkAll(t, tt.md)
		})
	}
}

func TestPlain(t *testing.T) {
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
			if got := Render(tt.md, Plain); got != tt.want {
				t.Errorf("Render(%q, Plain)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkAll(t, tt.md)
		})
	}
}
