package backup

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/parley-chat/parley/store/bolt"
)

// TestSpooler: the copy a running store makes is read back whole, and no
// spool file shows in the data directory, even before it is closed.
func TestSpooler(t *testing.T) {
	dir := t.TempDir()
	s, err := bolt.Open(filepath.Join(dir, "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fill(t, s, 10)
	sp := Spooler{Dir: dir, Take: s.Backup}
	rc, n, err := sp.Backup(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if got := names(t, dir); len(got) != 1 {
			t.Errorf("the data directory holds %q while the copy is open", got)
		}
	}
	got, err := io.ReadAll(rc)
	if err != nil || int64(len(got)) != n {
		t.Fatalf("read %d of %d bytes: %v", len(got), n, err)
	}
	rc.Close()
	out := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(out, got, 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, err := bolt.Verify(context.Background(), out); err != nil || sum.Sessions != 10 {
		t.Fatalf("Verify: %+v, %v", sum, err)
	}

	// A copy that fails leaves nothing either.
	broken := Spooler{Dir: dir, Take: func(ctx context.Context, w io.Writer) (int64, error) {
		_, _ = w.Write(bytes.Repeat([]byte{1}, 4<<20))
		return 0, errors.New("disk full")
	}}
	if _, _, err := broken.Backup(context.Background()); err == nil {
		t.Fatal("a failed copy succeeded")
	}
	if got := names(t, dir); len(got) != 1 {
		t.Errorf("the data directory holds %q", got)
	}
	// A spool file a killed parley left is swept.
	left := filepath.Join(dir, ".parley-spool-123")
	if err := os.WriteFile(left, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := SweepSpools(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("left behind: %v", err)
	}
}

// TestKey: the key is new at every start, owner-only, and read back as
// written.
func TestKey(t *testing.T) {
	dir := t.TempDir()
	k1, err := WriteKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := WriteKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if k1 == k2 || len(k2) != 64 {
		t.Errorf("keys %q, %q", k1, k2)
	}
	if got, err := ReadKey(dir); err != nil || got != k2 {
		t.Errorf("ReadKey: %q, %v, want %q", got, err, k2)
	}
	info, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || (runtime.GOOS != "windows" && info.Mode().Perm() != 0o600) {
		t.Errorf("mode %v, %v", info.Mode(), err)
	}
	if got := names(t, dir); len(got) != 1 {
		t.Errorf("the data directory holds %q", got)
	}
	if _, err := ReadKey(t.TempDir()); err == nil {
		t.Error("ReadKey of a directory without a key")
	}
}
