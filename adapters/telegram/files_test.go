package telegram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
