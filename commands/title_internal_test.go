package commands

import (
	"strings"
	"testing"
	"time"
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

func TestIsPlaceholder(t *testing.T) {
	created := time.Date(2026, 11, 23, 21, 4, 30, 0, time.UTC)
	tests := []struct {
		title string
		want  bool
	}{
		{placeholderTitle(created), true},
		{"Session Nov 23 21:03", true}, // an adapter's clock, a minute earlier
		{"Session Nov 23 21:06", true},
		{"Session Nov 23 21:07", false},
		{"Session Nov 22 21:04", false},
		{"Session Nov 23 9:04", false},
		{"Session Nov 23 21:04 notes", false},
		{"session Nov 23 21:04", false},
		{"Release checklist", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isPlaceholder(tt.title, created); got != tt.want {
			t.Errorf("isPlaceholder(%q) = %v, want %v", tt.title, got, tt.want)
		}
	}
	// Across New Year's Eve the placeholder's year is the one before.
	ny := time.Date(2027, 1, 1, 0, 0, 10, 0, time.UTC)
	if !isPlaceholder("Session Dec 31 23:59", ny) {
		t.Error("a placeholder from the minute before New Year is not recognised")
	}
}
