package backup

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// TestWrite: a backup lands whole under its name, or not at all: an
// existing name is kept unless replacing was asked for, and a copy that
// failed or does not check out leaves nothing, not even a temporary file.
func TestWrite(t *testing.T) {
	src := filepath.Join(t.TempDir(), "parley.db")
	newDB(t, src, 20)
	fromFile := func(f *os.File) error {
		_, err := bolt.BackupFile(context.Background(), src, f, time.Second)
		return err
	}
	ctx := context.Background()
	dir := t.TempDir()
	dest := filepath.Join(dir, "b.db")
	sum, err := Write(ctx, dest, false, fromFile)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Sessions != 20 || sum.Messages != 20 || sum.Schema != bolt.SchemaVersion {
		t.Errorf("summary %+v", sum)
	}
	if _, err := bolt.Verify(ctx, dest); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dest); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("mode: %v %v, want 0600", info.Mode(), err)
	}
	before := mustRead(t, dest)

	newDB(t, src, 5) // 25 sessions now
	if _, err := Write(ctx, dest, false, fromFile); !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "--force") {
		t.Errorf("over an existing file: %v, want ErrExists saying --force", err)
	}
	if !bytes.Equal(mustRead(t, dest), before) {
		t.Error("the existing file changed")
	}
	if sum, err := Write(ctx, dest, true, fromFile); err != nil || sum.Sessions != 25 {
		t.Errorf("replacing: %+v, %v", sum, err)
	}

	failing := []struct {
		name string
		fill func(*os.File) error
		want string
	}{
		{"copy fails", func(f *os.File) error {
			_, _ = f.Write(before[:4096])
			return errors.New("the daemon went away")
		}, "the daemon went away"},
		{"copy cut short", func(f *os.File) error { _, err := f.Write(before[:len(before)/2]); return err }, "does not check out"},
		{"not a database", func(f *os.File) error { _, err := f.WriteString("<html>login</html>"); return err }, "does not check out"},
	}
	for _, c := range failing {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			_, err := Write(ctx, filepath.Join(dir, "b.db"), false, c.fill)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Write: %v, want %q", err, c.want)
			}
			if c.want == "does not check out" && !errors.Is(err, core.ErrDamaged) {
				t.Errorf("%v does not wrap core.ErrDamaged", err)
			}
			if left := names(t, dir); len(left) != 0 {
				t.Errorf("left %q", left)
			}
		})
	}
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(ctx, filepath.Join(notDir, "b.db"), false, fromFile); err == nil || !strings.Contains(err.Error(), "cannot write in "+notDir) {
		t.Errorf("into a file's path: %v", err)
	}
	if left := names(t, dir); !slices.Equal(left, []string{"b.db"}) {
		t.Errorf("the destination's directory holds %q", left)
	}
}
