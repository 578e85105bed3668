package telegram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSafeName(t *testing.T) {
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
	}
	for _, tt := range tests {
		if got := safeName(tt.in); got != tt.want {
			t.Errorf("safeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	long := safeName(strings.Repeat("é", 200) + ".tar.gz")
	if len(long) > 120 || !strings.HasSuffix(long, ".gz") || !utf8.ValidString(long) {
		t.Errorf("long name %q (%d bytes)", long, len(long))
	}
}

func TestCreateNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for range 3 {
		f, path, err := create(dir, "notes.txt")
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		names = append(names, filepath.Base(path))
	}
	if strings.Join(names, ",") != "notes.txt,notes-2.txt,notes-3.txt" {
		t.Errorf("names %v", names)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files, want 3", len(entries))
	}
}
