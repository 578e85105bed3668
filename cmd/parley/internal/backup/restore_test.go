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

var restoreTime = time.Date(2026, 11, 28, 12, 30, 0, 0, time.UTC)

// TestRestore: the backup becomes parley.db, the database it replaced is
// kept beside it, and nothing else is left in the data directory.
func TestRestore(t *testing.T) {
	ctx := context.Background()
	backupFile := filepath.Join(t.TempDir(), "backup.db")
	newDB(t, backupFile, 3)
	data := t.TempDir()
	db := filepath.Join(data, "parley.db")
	newDB(t, db, 7)
	old := mustRead(t, db)

	r, err := Restore(ctx, backupFile, db, restoreTime)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != 3 || r.Aside != db+".before-restore-20261128T123000Z" {
		t.Errorf("restored %+v", r)
	}
	if !bytes.Equal(mustRead(t, db), mustRead(t, backupFile)) {
		t.Error("parley.db is not the backup")
	}
	if !bytes.Equal(mustRead(t, r.Aside), old) {
		t.Error("the replaced database was not kept as it was")
	}
	if got := names(t, data); !slices.Equal(got, []string{"parley.db", "parley.db.before-restore-20261128T123000Z"}) {
		t.Errorf("the data directory holds %q", got)
	}
	s, err := bolt.Open(db, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if list, _ := s.Sessions(ctx); len(list) != 3 {
		t.Errorf("the restored store has %d sessions", len(list))
	}
	s.Close()

	// Into a data directory with no database yet.
	fresh := filepath.Join(t.TempDir(), "new", "data")
	r, err = Restore(ctx, backupFile, filepath.Join(fresh, "parley.db"), restoreTime)
	if err != nil || r.Aside != "" {
		t.Fatalf("into a new data directory: %+v, %v", r, err)
	}
	if got := names(t, fresh); !slices.Equal(got, []string{"parley.db"}) {
		t.Errorf("the new data directory holds %q", got)
	}
}

// TestRestoreRefuses: while a parley holds the database, or when the file
// is not a sound parley database, Restore changes nothing and says why.
func TestRestoreRefuses(t *testing.T) {
	ctx := context.Background()
	good := filepath.Join(t.TempDir(), "backup.db")
	newDB(t, good, 3)
	whole := mustRead(t, good)
	files := t.TempDir()
	bad := map[string][]byte{
		"cut.db":   whole[:len(whole)/2],
		"page.txt": []byte("<html>not a database</html>"),
		"empty.db": nil,
	}
	for n, b := range bad {
		if err := os.WriteFile(filepath.Join(files, n), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data := t.TempDir()
	db := filepath.Join(data, "parley.db")
	newDB(t, db, 7)
	old := mustRead(t, db)
	unchanged := func(t *testing.T) {
		t.Helper()
		if !bytes.Equal(mustRead(t, db), old) {
			t.Error("parley.db changed")
		}
		if got := names(t, data); !slices.Equal(got, []string{"parley.db"}) {
			t.Errorf("the data directory holds %q", got)
		}
	}
	for n := range bad {
		t.Run(n, func(t *testing.T) {
			path := filepath.Join(files, n)
			_, err := Restore(ctx, path, db, restoreTime)
			var d *bolt.DamagedError
			if !errors.As(err, &d) || d.Path != path || !errors.Is(err, core.ErrDamaged) {
				t.Fatalf("Restore: %v, want a *DamagedError naming %s", err, path)
			}
			t.Log(err)
			unchanged(t)
		})
	}
	t.Run("directory", func(t *testing.T) {
		if _, err := Restore(ctx, files, db, restoreTime); !strings.Contains(fmtErr(err), "not a regular file") {
			t.Fatalf("Restore of a directory: %v", err)
		}
		unchanged(t)
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := Restore(ctx, filepath.Join(files, "none.db"), db, restoreTime); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Restore of no file: %v", err)
		}
		unchanged(t)
	})
	t.Run("in use", func(t *testing.T) {
		s, err := bolt.Open(db, bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		before, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Restore(ctx, good, db, restoreTime); !errors.Is(err, bolt.ErrInUse) {
			t.Fatalf("Restore under a running store: %v, want bolt.ErrInUse", err)
		}
		if after, err := os.Stat(db); err != nil || !os.SameFile(before, after) {
			t.Errorf("parley.db is another file: %v", err)
		}
		if got := names(t, data); !slices.Equal(got, []string{"parley.db"}) {
			t.Errorf("the data directory holds %q", got)
		}
	})
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
