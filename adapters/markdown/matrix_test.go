package markdown

import "testing"

func TestMatrixHTML(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"empty", "", ""},
		{"one paragraph", "a **b** *c* ~~d~~ `e`", "a <strong>b</strong> <em>c</em> <del>d</del> <code>e</code>"},
		{"paragraphs", "a\n\nb", "<p>a</p>\n\n<p>b</p>"},
		{"line breaks", "a\nb  \nc\\\nd", "a<br>b<br>c<br>d"},
		{"escaping", `a < b && "c"`, `a &lt; b &amp;&amp; "c"`},
		{"code in bold", "**a `c` d**", "<strong>a <code>c</code> d</strong>"},
		{"bold in bold", "**a **b** c**", "<strong>a b c</strong>"},
		{"link", `[q](https://x.y/?a=1&b="2")`, `<a href="https://x.y/?a=1&amp;b=%222%22">q</a>`},
		{"formatted link", "[**a** `b`](https://x.y)", `<a href="https://x.y"><strong>a</strong> b</a>`},
		{"link schemes", "[f](ftp://x.y/f) [m](mailto:a@b.c) [me](tg://user?id=1) [j](javascript:x)",
			`<a href="ftp://x.y/f">f</a> <a href="mailto:a@b.c">m</a> me j`},
		{"image", "![a cat](https://c/at.png)", `<a href="https://c/at.png">a cat</a>`},
		{"heading", "## Use `go test`", "<h2>Use <code>go test</code></h2>"},
		{"setext heading", "a\nb\n===", "<h1>a<br>b</h1>"},
		{"nested quote", "> a\n>\n> > b", "<blockquote><p>a</p>\n\n<blockquote><p>b</p></blockquote></blockquote>"},
		{"language", "```c++ extra\nx < y\n```", `<pre><code class="language-c++">x &lt; y</code></pre>`},
		{"odd language", "```{.py}\nx\n```", "<pre><code>x</code></pre>"},
		{"list", "- a\n  - b\n- c", "<ul>\n<li>a\n<ul>\n<li>b</li>\n</ul></li>\n<li>c</li>\n</ul>"},
		{"ordered from 3", "3. a\n4. b", "<ol start=\"3\">\n<li>a</li>\n<li>b</li>\n</ol>"},
		{"loose list", "1. a\n\n1. b", "<ol>\n<li><p>a</p></li>\n<li><p>b</p></li>\n</ol>"},
		{"task list", "- [ ] todo\n- [x] done", "<ul>\n<li>☐ todo</li>\n<li>☑ done</li>\n</ul>"},
		{"rule", "a\n\n***\n\nb", "<p>a</p>\n\n<hr>\n\n<p>b</p>"},
		{"raw html", "<div>\nx\n</div>", "<p>&lt;div&gt;<br>x<br>&lt;/div&gt;</p>"},
		{"inline html", "a <b>x</b>", "a &lt;b&gt;x&lt;/b&gt;"},
		{"table", "| a | b |\n|---|---|\n| **c** | d |",
			"<table>\n<thead><tr><th>a</th><th>b</th></tr></thead>\n<tbody>\n<tr><td><strong>c</strong></td><td>d</td></tr>\n</tbody>\n</table>"},
		{"header-only table", "| a |\n|---|", "<table>\n<thead><tr><th>a</th></tr></thead>\n</table>"},
		{"only definitions", "[r]: https://x.y", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.md, MatrixHTML); got != tt.want {
				t.Errorf("Render(%q, MatrixHTML)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkAll(t, tt.md)
		})
	}
}

func TestMatrix(t *testing.T) {
	md := "**Done**: see [the log](https://x.y/log).\n\n- a < b"
	body, html := Matrix(md)
	if want := "Done: see the log (https://x.y/log).\n\n• a < b"; body != want {
		t.Errorf("body = %q, want %q", body, want)
	}
	if want := "<p><strong>Done</strong>: see <a href=\"https://x.y/log\">the log</a>.</p>\n\n<ul>\n<li>a &lt; b</li>\n</ul>"; html != want {
		t.Errorf("formatted_body = %q, want %q", html, want)
	}
	if got, want := Measure(md, MatrixHTML), len(body)+len(html); got != want {
		t.Errorf("Measure = %d, want %d", got, want)
	}
}
