package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
)

func TestOpenFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	if err := os.Mkdir(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "parley.toml")
	if err := os.WriteFile(path, []byte("[http]\ntoken = \"0123456789abcdef\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	chmod := func(p string, mode os.FileMode) {
		t.Helper()
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	if got := openFiles(path, cfg); len(got) != 0 {
		t.Errorf("no secret in the config: %+v", got)
	}
	secret := cfg
	secret.HTTP.Token = "0123456789abcdef"
	if got := openFiles(path, secret); len(got) != 0 {
		t.Errorf("config 0600, data 0700: %+v", got)
	}
	chmod(path, 0o640) // a system service reads it through its group
	if got := openFiles(path, secret); len(got) != 0 {
		t.Errorf("config 0640: %+v", got)
	}
	chmod(path, 0o644)
	got := openFiles(path, secret)
	if len(got) != 1 || !strings.Contains(got[0].Problem, "0644") || !strings.HasPrefix(got[0].Fix, "chmod 600 "+path) {
		t.Errorf("config 0644: %+v", got)
	}
	chmod(path, 0o600)
	chmod(cfg.DataDir, 0o750)
	got = openFiles(path, secret)
	if len(got) != 1 || got[0].Fix != "chmod 700 "+cfg.DataDir || !strings.Contains(got[0].Problem, "0750") {
		t.Errorf("data directory 0750: %+v", got)
	}
}
