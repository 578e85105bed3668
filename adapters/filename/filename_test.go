package filename

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSafe(t *testing.T) {
	tests := []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{"../../etc/passwd", "passwd"},
		{"..\\..\\boot.ini", "boot.ini"},
		{".bashrc", "bashrc"},
		{"...", "file"},
		{"", "file"},
		{"/", "file"},
		{"a\x00b\nc.txt", "a_b_c.txt"},
		{"  spaced  .txt ", "spaced  .txt"},
		{"résumé.docx", "résumé.docx"},
		{"dir/", "dir"},
		{"-", "-"},
	}
	for _, tt := range tests {
		if got := Safe(tt.in); got != tt.want {
			t.Errorf("Safe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := Safe(strings.Repeat("é", 200) + ".tar.gz")
	if len(long) > MaxLen || !strings.HasSuffix(long, ".gz") || !utf8.ValidString(long) {
		t.Errorf("long name %q (%d bytes)", long, len(long))
	}
}

func FuzzSafe(f *testing.F) {
	for _, s := range []string{"a.txt", "../x", ".hidden", strings.Repeat("ü", 100) + ".md"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		s := Safe(name)
		if s == "" || strings.HasPrefix(s, ".") || strings.ContainsAny(s, "/\\\x00") || len(s) > MaxLen {
			t.Errorf("Safe(%q) = %q", name, s)
		}
		if utf8.ValidString(name) && !utf8.ValidString(s) {
			t.Errorf("Safe(%q) = %q is not valid UTF-8", name, s)
		}
	})
}
