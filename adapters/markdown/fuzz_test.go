package markdown

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds are the golden inputs and a few shapes the fuzzer should start
// from.
func fuzzSeeds(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.md")
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		"", "**a `b` c**", "[a ![b](http://c)](http://d)", "> > - ```\n> > x", "1. a\n1. b\n   1. c",
		"|a|b|\n|-|:-:|\n|日本|😀|", "<b>&amp;</b>", "- [ ] x\n\t- [x] y", "***a**b*", "~~a **b~~ c**",
		"www.example.com/a?b=<c>", "&#55296; &#x10FFFF; &#0;", "a\r\nb\rc", "```\n<pre>\n```",
		"**a\nb**", "[a\nb](http://c)", "`` a`b ``", "````\n```\n````", "- a\n\n  ```\n  b\n  ```",
	} {
		f.Add(s)
	}
}

// fuzzDialect checks that whatever the markdown, the rendering in d is
// valid for the platform, its visible text within the account's allowance
// of the source's length, its lengths honest, and Fit true to its word.
func fuzzDialect(f *testing.F, d Dialect, extra func(t *testing.T, md, out string)) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			t.Skip()
		}
		// render, not Render: without renderSafe's recover, panics show.
		// An allowance of 0 checks the length account strictly.
		for _, allow := range []int{MaxGrowth, 0} {
			out := render(md, d, allow)
			if err := checkRendering(md, d, out, allow); err != nil {
				t.Fatal(err)
			}
			if extra != nil {
				extra(t, md, out)
			}
		}
		budget := Measure(md, d) - 1
		if out, fits := Fit(md, d, budget); fits != (d.Length(md, out) <= budget) {
			t.Fatalf("Fit(%q, %d) = %q, %v: Length %d", md, budget, out, fits, d.Length(md, out))
		}
	})
}

func FuzzTelegramHTML(f *testing.F) { fuzzDialect(f, TelegramHTML, nil) }

// FuzzPlain also checks that plain text adds no markup.
func FuzzPlain(f *testing.F) {
	fuzzDialect(f, Plain, func(t *testing.T, md, out string) {
		if !strings.ContainsAny(md, "<&") && strings.Contains(out, "<") {
			t.Fatalf("plain text of %q = %q adds markup", md, out)
		}
	})
}

func FuzzSlack(f *testing.F) { fuzzDialect(f, Slack, nil) }

func FuzzMatrixHTML(f *testing.F) { fuzzDialect(f, MatrixHTML, nil) }
