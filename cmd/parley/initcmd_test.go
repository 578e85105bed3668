package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
)

// TestInitWritesTheExample: parley init writes the commented example to a
// new file readable by its owner only, and the file loads as the
// defaults.
func TestInitWritesTheExample(t *testing.T) {
	home := t.TempDir()
	env := []string{"HOME=" + home}
	path := filepath.Join(t.TempDir(), "parley.toml")
	var out, errOut bytes.Buffer
	if code := Run(context.Background(), []string{"init", path}, env, nil, &out, &errOut); code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, config.Example(env, platforms.Known(platforms.All()))) {
		t.Error("the file is not config.Example")
	}
	if info, _ := os.Stat(path); info.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600: it will hold tokens", info.Mode().Perm())
	}
	if !strings.Contains(errOut.String(), "parley doctor --config "+path) {
		t.Errorf("init does not say how to check the file: %s", errOut.String())
	}
	cfg, err := loadConfig(path, env)
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	if cfg.HTTP.Listen != "127.0.0.1:8765" || cfg.DataDir != filepath.Join(home, ".local", "share", "parley") {
		t.Errorf("the example does not load as the defaults: %v", cfg)
	}
}

func TestInitNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.toml")
	mine := []byte("[telegram]\ntoken = \"123:mine\"\n")
	if err := os.WriteFile(path, mine, 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	code := Run(context.Background(), []string{"init", path}, []string{"HOME=/h"}, nil, &bytes.Buffer{}, &errOut)
	if code != exitFailed {
		t.Errorf("exit %d, want %d", code, exitFailed)
	}
	if !strings.Contains(errOut.String(), path+" already exists") || !strings.Contains(errOut.String(), "left as it was") {
		t.Errorf("error %q does not say the file exists and is kept", errOut.String())
	}
	if data, _ := os.ReadFile(path); !bytes.Equal(data, mine) {
		t.Errorf("the file changed: %q", data)
	}
}

func TestInitToStdout(t *testing.T) {
	env := []string{"HOME=/home/ann"}
	for _, args := range [][]string{{"init"}, {"init", "-"}} {
		var out bytes.Buffer
		if code := Run(context.Background(), args, env, nil, &out, &bytes.Buffer{}); code != exitOK {
			t.Fatalf("%v: exit %d", args, code)
		}
		if !bytes.Equal(out.Bytes(), config.Example(env, platforms.Known(platforms.All()))) {
			t.Errorf("%v printed something else than the example", args)
		}
	}
	if code := Run(context.Background(), []string{"init", "a", "b"}, env, nil, &bytes.Buffer{}, &bytes.Buffer{}); code != exitUsage {
		t.Errorf("two paths: exit %d", code)
	}
}
