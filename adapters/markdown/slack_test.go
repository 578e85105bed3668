package markdown

import "testing"

func TestSlack(t *testing.T) {
	tests := []struct {
		name, md, want string
	}{
		{"empty", "", ""},
		{"escaping", `a < b && c > "d"`, `a &lt; b &amp;&amp; c &gt; "d"`},
		{"formatting", "**b** *i* _j_ ~~s~~ `c`", "*b* _i_ _j_ ~s~ `c`"},
		{"bold italic", "***x***", "_*x*_"},
		{"bold in bold", "**a **b** c**", "*a b c*"},
		{"code in bold", "**a `c` d**", "*a `c` d*"},
		{"code escaping", "`a<b>&c`", "`a&lt;b&gt;&amp;c`"},
		{"code with a backtick", "``a ` b``", "a `\u200b b"},
		{"backticks in text", "\\`\\`\\`x", "`\u200b`\u200b`\u200bx"},
		{"formatting across lines", "**a\nb**", "*a*\n*b*"},
		{"hard break", "_a  \nb_", "_a_\n_b_"},
		{"link", "[docs](https://go.dev/doc?a=1&b=2)", "<https://go.dev/doc?a=1&amp;b=2|docs>"},
		{"link text escaping", "[a < b](https://x.y/?q=<c>)", "<https://x.y/?q=%3Cc%3E|a &lt; b>"},
		{"pipe in URL", "[a](https://x.y/a|b)", "<https://x.y/a%7Cb|a>"},
		{"bold link", "**[a](https://x.y)**", "*<https://x.y|a>*"},
		{"formatting in link text", "[**a** `b`](https://x.y)", "<https://x.y|a b>"},
		{"link across lines", "[a\nb](https://x.y)", "<https://x.y|a>\n<https://x.y|b>"},
		{"empty link text", "[](https://x.y)", "<https://x.y|https://x.y>"},
		{"mailto", "<a@b.c>", "<mailto:a@b.c|a@b.c>"},
		{"rejected links", "[x](javascript:alert(1)) [me](tg://user?id=1) [f](ftp://x.y)", "x me f"},
		{"image", "![a cat](https://c/at.png)", "<https://c/at.png|a cat>"},
		{"raw html", "<b>x</b>", "&lt;b&gt;x&lt;/b&gt;"},
		{"heading", "# Title *x*\ntext", "*Title _x_*\ntext"},
		{"quote", "> a\n> > b\n\nc", "> a\n> b\n\nc"},
		{"quote with code", "> ```\n> x\n> ```", "> ```\n> x\n> ```"},
		{"code block", "```go\nif a < b {}\n```", "```\nif a &lt; b {}\n```"},
		{"fence in code", "````\nx ```\n````", "```\nx `\u200b``\n```"},
		{"list", "- a\n  - b\n\n    more\n1. c", "• a\n  ◦ b\n\n    more\n1. c"},
		{"code in a list", "- a\n\n  ```\n  x\n  ```\n- b", "• a\n\n```\nx\n```\n• b"},
		{"item starting with code", "- ```\n  x\n  ```", "•\n```\nx\n```"},
		{"item starting with a quote", "- > q\n- b", "•\n> q\n• b"},
		{"task list", "- [ ] todo\n- [x] done", "☐ todo\n☑ done"},
		{"table", "| a | b |\n|---|--:|\n| c | 10 |", "```\na |  b\n--+---\nc | 10\n```"},
		{"rule", "a\n\n---\n\nb", "a\n\n———\n\nb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Render(tt.md, Slack); got != tt.want {
				t.Errorf("Render(%q, Slack)\n got %q\nwant %q", tt.md, got, tt.want)
			}
			checkAll(t, tt.md)
		})
	}
}

func TestSlackVisible(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"", 0},
		{"*a* _b_", 7},
		{"&amp;&lt;&gt;&quot;", 9},
		{"<https://x.y/?a=1&amp;b|docs &amp; more>", 11},
		{"<https://x.y>", 11},
		{"`\u200b`", 2},
		{"日本😀", 3},
	}
	for _, tt := range tests {
		if got := Slack.Visible(tt.s); got != tt.want {
			t.Errorf("Slack.Visible(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}
