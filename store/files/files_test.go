package files_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/files"
)

func newStore(tb testing.TB, dir string, opts files.Options) *files.Store {
	tb.Helper()
	s, err := files.New(dir, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func put(tb testing.TB, s *files.Store, name, content string) core.Attachment {
	tb.Helper()
	a, err := s.Put(context.Background(), name, "text/plain", strings.NewReader(content), 1<<20)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

func read(tb testing.TB, s *files.Store, a core.Attachment) (string, error) {
	tb.Helper()
	r, err := s.Open(a)
	if err != nil {
		return "", err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b), nil
}

// names lists the directory.
func names(tb testing.TB, dir string) []string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// A copy is named by its content (with a plain extension), read-only,
// in a private directory, and the same content is kept once.
func TestPutAndOpen(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "blobs")
	s := newStore(t, dir, files.Options{})
	a := put(t, s, "Report.CSV", "a,b\n1,2\n")
	if a.Digest != digest("a,b\n1,2\n") || a.Size != 8 || a.Name != "Report.CSV" || a.Mime != "text/plain" ||
		a.Path != filepath.Join(dir, a.Digest+".csv") {
		t.Errorf("attachment %+v", a)
	}
	if got, err := read(t, s, a); err != nil || got != "a,b\n1,2\n" {
		t.Errorf("read %q, %v", got, err)
	}
	fi, err := os.Stat(a.Path)
	if err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("copy's mode %v (%v), want 0400", fi.Mode(), err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Errorf("directory's mode %v (%v), want 0700", di.Mode(), err)
	}
	again := put(t, s, "report.csv", "a,b\n1,2\n")
	if again.Path != a.Path || s.Total() != 8 {
		t.Errorf("the same content again: %s, total %d; want one copy of 8 bytes", again.Path, s.Total())
	}
	// Names whose extension is not plain keep none.
	odd := put(t, s, "x.tar gz", "odd")
	if filepath.Base(odd.Path) != odd.Digest {
		t.Errorf("copy of x.tar gz named %s", filepath.Base(odd.Path))
	}
	if got := names(t, dir); len(got) != 2 {
		t.Errorf("directory holds %q, want two copies and nothing else", got)
	}
	// Opened again (a restart), the store counts what it holds.
	if n := newStore(t, dir, files.Options{}).Total(); n != 11 {
		t.Errorf("reopened store counts %d bytes, want 11", n)
	}
}

// Past the file's limit, past the store's total, or when the source fails,
// Put keeps nothing and counts nothing.
func TestPutRefusals(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, files.Options{MaxTotal: 100, Setting: "files_max_mb (PARLEY_FILES_MAX_MB)"})
	ctx := context.Background()
	if _, err := s.Put(ctx, "big", "", strings.NewReader(strings.Repeat("x", 11)), 10); !errors.Is(err, core.ErrFileTooLarge) {
		t.Errorf("11 bytes with a limit of 10: %v", err)
	}
	put(t, s, "first", strings.Repeat("a", 60))
	_, err := s.Put(ctx, "second", "", strings.NewReader(strings.Repeat("b", 60)), 1000)
	if !errors.Is(err, core.ErrFileStoreFull) || !strings.Contains(err.Error(), "files_max_mb (PARLEY_FILES_MAX_MB)") {
		t.Errorf("past the total: %v, want ErrFileStoreFull naming the setting", err)
	}
	broken := iotest.TimeoutReader(strings.NewReader(strings.Repeat("c", 100<<10)))
	if _, err := s.Put(ctx, "broken", "", broken, 1<<20); err == nil {
		t.Error("a failing source was kept")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cancelled, "late", "", strings.NewReader("z"), 10); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled Put: %v", err)
	}
	if got := names(t, dir); len(got) != 1 || s.Total() != 60 {
		t.Errorf("directory holds %q, total %d; want the first copy alone", got, s.Total())
	}
}

// Open hands out only an intact copy: one changed on disk, replaced by a
// symlink or gone is refused, and so is an attachment with no digest. A
// copy at the attachment's path in another directory (another instance's
// on this machine) is taken when its content has the digest.
func TestOpenChecksTheCopy(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, files.Options{})
	secret := filepath.Join(t.TempDir(), "parley.toml")
	if err := os.WriteFile(secret, []byte("token = \"s3cret\""), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(a core.Attachment)
	}{
		{"changed in place", func(a core.Attachment) {
			os.Chmod(a.Path, 0o600)
			os.WriteFile(a.Path, []byte("HELLO"), 0o600)
		}},
		{"replaced by a symlink", func(a core.Attachment) {
			os.Remove(a.Path)
			os.Symlink(secret, a.Path)
		}},
		{"removed", func(a core.Attachment) { os.Remove(a.Path) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := put(t, s, tc.name+".txt", "hello")
			tc.change(a)
			if got, err := read(t, s, a); err == nil {
				t.Errorf("opened, reading %q", got)
			}
		})
	}
	if _, err := read(t, s, core.Attachment{Name: "old", Path: secret, Size: 16}); err == nil {
		t.Error("an attachment with no digest was opened by its path")
	}

	// Another instance's copy, at the attachment's path.
	other := newStore(t, t.TempDir(), files.Options{})
	a := put(t, other, "theirs.txt", "from the other instance")
	if got, err := read(t, s, a); err != nil || got != "from the other instance" {
		t.Errorf("another instance's copy: %q, %v", got, err)
	}
	os.Chmod(a.Path, 0o600)
	os.WriteFile(a.Path, []byte("from the OTHER instance"), 0o600)
	if _, err := read(t, s, a); err == nil {
		t.Error("another instance's copy, changed, was opened")
	}
	// A path that is no copy's name is not tried.
	b := put(t, other, "b.txt", "bytes")
	b.Path = filepath.Join(filepath.Dir(b.Path), "elsewhere.txt")
	os.WriteFile(b.Path, []byte("bytes"), 0o600)
	if _, err := read(t, s, b); err == nil {
		t.Error("a path that names no copy was read")
	}
}

// Concurrent Puts of the same and of different content keep one copy of
// each and count each once.
func TestPutConcurrently(t *testing.T) {
	dir := t.TempDir()
	s := newStore(t, dir, files.Options{})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			content := "same"
			if i%2 == 1 {
				content = "other"
			}
			a := put(t, s, "f.txt", content)
			s.Release(a)
		})
	}
	wg.Wait()
	if got := names(t, dir); len(got) != 2 || s.Total() != int64(len("same")+len("other")) {
		t.Errorf("directory %q, total %d", got, s.Total())
	}
}
