package telegramtest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/go-telegram/bot/models"
)

func TestParseHTMLAccepts(t *testing.T) {
	tests := []struct {
		name, src, text string
		ents            string // entities as JSON
	}{
		{"plain", "hello", "hello", "null"},
		{"bold", "<b>bold</b> and <strong>strong</strong>", "bold and strong",
			`[{"type":"bold","offset":0,"length":4},{"type":"bold","offset":9,"length":6}]`},
		{"nested", "<b>a<i>b</i></b>", "ab",
			`[{"type":"bold","offset":0,"length":2},{"type":"italic","offset":1,"length":1}]`},
		{"entities", "&lt;tag&gt; &amp; &quot;q&quot; &#65;&#x42;", `<tag> & "q" AB`, "null"},
		{"entity without semicolon", "&lt 5 &lta", "< 5 &lta", "null"},
		{"unknown entity stays literal", "&nbsp; & fish", "&nbsp; & fish", "null"},
		{"link", `<a href="https://example.com/?a=1&amp;b=2">x</a>`, "x",
			`[{"type":"text_link","offset":0,"length":1,"url":"https://example.com/?a=1\u0026b=2"}]`},
		{"mention", `<a href="tg://user?id=42">Bob</a>`, "Bob",
			`[{"type":"text_mention","offset":0,"length":3,"user":{"id":42,"is_bot":false}}]`},
		{"pre with language", `<pre><code class="language-go">x := 1</code></pre>`, "x := 1",
			`[{"type":"pre","offset":0,"length":6,"language":"go"}]`},
		{"pre plain", `<pre>x</pre>`, "x", `[{"type":"pre","offset":0,"length":1}]`},
		{"spoilers", `<tg-spoiler>a</tg-spoiler><span class="tg-spoiler">b</span>`, "ab",
			`[{"type":"spoiler","offset":0,"length":1},{"type":"spoiler","offset":1,"length":1}]`},
		{"expandable quote", `<blockquote expandable>q</blockquote>`, "q",
			`[{"type":"expandable_blockquote","offset":0,"length":1}]`},
		{"quote", `<blockquote>q</blockquote>`, "q", `[{"type":"blockquote","offset":0,"length":1}]`},
		{"custom emoji", `<tg-emoji emoji-id="5368324170671202286">👍</tg-emoji>`, "👍",
			`[{"type":"custom_emoji","offset":0,"length":2,"custom_emoji_id":"5368324170671202286"}]`},
		{"utf16 offsets", "😀<b>x</b>", "😀x", `[{"type":"bold","offset":2,"length":1}]`},
		{"upper case tags", "<B>x</B>", "x", `[{"type":"bold","offset":0,"length":1}]`},
		{"empty end tag", "<u>x</>", "x", `[{"type":"underline","offset":0,"length":1}]`},
		{"all strikes", "<s>a</s><strike>b</strike><del>c</del><ins>d</ins><em>e</em>", "abcde",
			`[{"type":"strikethrough","offset":0,"length":1},{"type":"strikethrough","offset":1,"length":1},{"type":"strikethrough","offset":2,"length":1},{"type":"underline","offset":3,"length":1},{"type":"italic","offset":4,"length":1}]`},
		{"empty tag vanishes", "<b></b>x", "x", "null"},
		{"unquoted attribute", `<code class=language-py>p</code>`, "p", `[{"type":"code","offset":0,"length":1,"language":"py"}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, ents, err := parseHTML(tt.src)
			if err != nil {
				t.Fatalf("parseHTML(%q): %v", tt.src, err)
			}
			if text != tt.text {
				t.Errorf("text = %q, want %q", text, tt.text)
			}
			got, _ := json.Marshal(ents)
			if string(got) != tt.ents {
				t.Errorf("entities = %s, want %s", got, tt.ents)
			}
		})
	}
}

func TestParseHTMLRejects(t *testing.T) {
	tests := []struct{ src, err string }{
		{"a < b", `Unsupported start tag "" at byte offset 2`},
		{"<br>", `Unsupported start tag "br" at byte offset 0`},
		{"x<p>y</p>", `Unsupported start tag "p" at byte offset 1`},
		{"<b>x", `Can't find end tag corresponding to start tag "b"`},
		{"x</b>", `Unexpected end tag at byte offset 1`},
		{"<b><i>x</b></i>", `Unmatched end tag at byte offset 7, expected "</i>", found "</b>"`},
		{"<b", `Unclosed start tag at byte offset 0`},
		{"<b>x</b", `Unclosed end tag at byte offset 4`},
		{`<span class="x">s</span>`, `Tag "span" must have class "tg-spoiler" at byte offset 0`},
		{`<a href>x</a>`, `Expected equal sign in declaration of an attribute of the tag "a" at byte offset 0`},
		{`<a href=x"y">x</a>`, `Unexpected end of name token at byte offset 8`},
		{`<tg-emoji emoji-id="nope">x</tg-emoji>`, `Invalid custom emoji identifier specified`},
		{`<a href="x`, `Unclosed start tag at byte offset 0`},
	}
	for _, tt := range tests {
		_, _, err := parseHTML(tt.src)
		if err == nil || err.Error() != tt.err {
			t.Errorf("parseHTML(%q) = %v, want %q", tt.src, err, tt.err)
		}
	}
}

func TestTrimText(t *testing.T) {
	text, ents := trimText("\n  <x>  \n", []models.MessageEntity{{Type: "bold", Offset: 3, Length: 3}})
	if text != "<x>" || len(ents) != 1 || ents[0].Offset != 0 || ents[0].Length != 3 {
		t.Errorf("trimText = %q %+v", text, ents)
	}
}

func TestMarkdownVisible(t *testing.T) {
	md := strings.Join([]string{
		"# Title",
		"Some **bold** and `code` with [a link](https://x.y).",
		"",
		"| a | b |",
		"|---|---|",
		"| 1 | 2 |",
		"",
		"- item",
		"> quote",
		"```go",
		"x := **y**",
		"```",
	}, "\n")
	want := "Title\nSome bold and code with a link.\n\na b\n1 2\n\nitem\nquote\nx := **y**"
	if got := markdownVisible(md); got != want {
		t.Errorf("markdownVisible = %q, want %q", got, want)
	}
}

func TestRichHTMLVisible(t *testing.T) {
	got, err := richHTMLVisible("<h1>T</h1><p>a &amp; b<br/>c</p><table><tr><td>x</td></tr></table>")
	if err != nil || got != "Ta & b\ncx" {
		t.Errorf("richHTMLVisible = %q, %v", got, err)
	}
	if _, err := richHTMLVisible("<p><b>x</p>"); err == nil {
		t.Error("unbalanced rich HTML accepted")
	}
}

func TestDetectCommands(t *testing.T) {
	ents := detectEntities("/new@parley_test_bot my title /help, not/this")
	got, _ := json.Marshal(ents)
	want := `[{"type":"bot_command","offset":0,"length":20},{"type":"bot_command","offset":30,"length":5}]`
	if string(got) != want {
		t.Errorf("entities = %s, want %s", got, want)
	}
}

func FuzzParseHTML(f *testing.F) {
	for _, seed := range []string{
		"<b>x</b>", "a < b", "&lt;&#128512;&#x1F600;&amp", `<a href="https://x.y">l</a>`,
		`<pre><code class="language-go">x</code></pre>`, "<blockquote expandable>q</blockquote>", "<b><i>x</b></i>",
		`<span class=tg-spoiler>s</span>`, `<tg-emoji emoji-id="1">e</tg-emoji>`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		text, ents, err := parseHTML(src)
		if err != nil {
			return
		}
		n := utf16Count(text)
		for _, e := range ents {
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > n {
				t.Fatalf("parseHTML(%q): entity %+v outside %d units of %q", src, e, n, text)
			}
		}
		trimmed, kept := trimText(text, ents)
		m := utf16Count(trimmed)
		for _, e := range kept {
			if e.Offset < 0 || e.Length <= 0 || e.Offset+e.Length > m {
				t.Fatalf("trimText: entity %+v outside %d units", e, m)
			}
		}
	})
}
