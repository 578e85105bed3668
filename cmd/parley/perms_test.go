package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenFiles(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.toml")
	plain := filepath.Join(dir, "plain.toml")
	write := func(path, text string, mode os.FileMode) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
	}
	write(secret, "[telegram]\ntoken = \"123:abc\"\n", 0o644)
	write(plain, "[log]\nlevel = \"debug\"\n", 0o644)

	got := openFiles(secret, data)
	if len(got) != 1 || !strings.Contains(got[0].Problem, "telegram.token") || !strings.Contains(got[0].Problem, "0644") ||
		got[0].Fix != "chmod 600 "+secret {
		t.Errorf("secret config 0644: %+v", got)
	}
	if strings.Contains(got[0].Problem, "123:abc") {
		t.Errorf("the warning shows the secret: %s", got[0].Problem)
	}
	if got := openFiles(plain, data); len(got) != 0 {
		t.Errorf("config without secrets: %+v", got)
	}
	write(secret, "[telegram]\ntoken = \"123:abc\"\n", 0o600)
	if got := openFiles(secret, data); len(got) != 0 {
		t.Errorf("secret config 0600: %+v", got)
	}
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	got = openFiles("", data)
	if len(got) != 1 || got[0].Fix != "chmod 700 "+data || !strings.Contains(got[0].Problem, "0755") {
		t.Errorf("data directory 0755: %+v", got)
	}
}
