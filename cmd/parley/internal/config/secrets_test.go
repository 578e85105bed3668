package config

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFileSecrets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.toml")
	file := "[http]\ntoken = \"x\"\nlisten = \"127.0.0.1:1\"\n[telegram]\ntoken = \"\"\n[slack]\nbot_token = \"xoxb\"\n[matrix]\npassword = \"pw\"\n"
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	got := FileSecrets(path)
	if want := []string{"http.token", "slack.bot_token", "matrix.password"}; !slices.Equal(got, want) {
		t.Errorf("FileSecrets = %q, want %q", got, want)
	}
	if err := os.WriteFile(path, []byte("[log]\nlevel = \"debug\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := FileSecrets(path); len(got) != 0 {
		t.Errorf("FileSecrets of a file without secrets = %q", got)
	}
}
