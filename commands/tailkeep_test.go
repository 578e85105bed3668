package commands

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTailKeep(t *testing.T) {
	tests := []struct {
		name string
		s    string
		max  int
		want string
	}{
		{"fits", "ok\n", 16, "ok\n"},
		{"exactly max", "12345", 5, "12345"},
		{"empty", "", 0, ""},
		{"keeps the end", "line 1\nline 2\nexit 1\n", 7, "… [14 bytes cut]\nexit 1\n"},
		{"nothing kept", "abc", 0, "… [3 bytes cut]\n"},
		// The cut moves forward to a character's start: fewer than max
		// bytes are kept rather than half a character.
		{"cut inside a character", strings.Repeat("é", 10), 5, "… [16 bytes cut]\néé"},
		{"cut at a character", strings.Repeat("é", 10), 4, "… [16 bytes cut]\néé"},
		{"cut inside a four-byte character", "ab😀cd", 4, "… [6 bytes cut]\ncd"},
		// A long output whose cut falls inside "é" keeps fewer bytes.
		{"long, cut inside a character", strings.Repeat("a", 100) + "é" + strings.Repeat("z", 9), 10, "… [102 bytes cut]\n" + strings.Repeat("z", 9)},
		{"long, cut at a character", strings.Repeat("a", 100) + "é" + strings.Repeat("z", 9), 11, "… [100 bytes cut]\né" + strings.Repeat("z", 9)},
		{"short", "short", 16, "short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tailKeep(tt.s, tt.max)
			if got != tt.want {
				t.Errorf("tailKeep(%q, %d) = %q, want %q", tt.s, tt.max, got, tt.want)
			}
			if !utf8.ValidString(got) {
				t.Errorf("tailKeep cut inside a character: %q", got)
			}
		})
	}
}
