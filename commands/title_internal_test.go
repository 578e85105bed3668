package commands

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTitleFrom(t *testing.T) {
	long := "Please look at the tokenizer in parse.go because it drops the last token when there is no newline"
	tests := []struct{ name, text, want string }{
		{"first line", "Fix the flaky login test\nIt fails one run in ten.", "Fix the flaky login test"},
		{"blank lines first", "\n\n   \n  hello there  \n", "hello there"},
		{"spaces collapsed", "a\t\tb    c", "a b c"},
		{"heading marks", "## Release plan\n- tag", "Release plan"},
		{"quote marks", "> what they said", "what they said"},
		{"only marks", "###\n>\nreal line", "real line"},
		{"nothing", "  \n\t\n", ""},
		{"exactly the limit", strings.Repeat("x", maxAutoTitle), strings.Repeat("x", maxAutoTitle)},
		{"cut on a word", long, "Please look at the tokenizer in parse.go because it drops…"},
		{"one long word is cut inside", strings.Repeat("y", 100), strings.Repeat("y", maxAutoTitle-1) + "…"},
		{"no punctuation before the ellipsis", "Refactor everything, the parser, the lexer, the printer, the checker, and more",
			"Refactor everything, the parser, the lexer, the printer…"},
		{"characters not bytes", strings.Repeat("é", 70), strings.Repeat("é", maxAutoTitle-1) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := titleFrom(tt.text)
			if got != tt.want {
				t.Fatalf("titleFrom(%q) = %q, want %q", tt.text, got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > maxAutoTitle {
				t.Fatalf("title has %d characters, more than %d", n, maxAutoTitle)
			}
		})
	}
}
