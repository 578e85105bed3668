package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-chat/parley/store/bolt"
)

// Restored is what Restore put in place.
type Restored struct {
	// Summary is what bolt.Verify found in the restored database.
	bolt.Summary
	// Aside is where the database it replaced is kept; empty when there
	// was none.
	Aside string
}

// RestoreLockTimeout is how long Restore waits for a parley to let go of
// the database before it says one runs.
const RestoreLockTimeout = time.Second

// Restore makes the backup file the database db (the data directory's
// parley.db), keeping the one it replaces beside it, named for now (see
// the package documentation). It refuses, changing nothing, when a parley
// holds db (an error wrapping bolt.ErrInUse), and when file is not a sound
// parley database (a *bolt.DamagedError naming file, or an error wrapping
// core.ErrSchemaTooNew).
func Restore(ctx context.Context, file, db string, now time.Time) (Restored, error) {
	var r Restored
	dir := filepath.Dir(db)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return r, fmt.Errorf("data directory: %w", err)
	}
	_, err := os.Lstat(db)
	exists := err == nil
	if exists {
		unlock, err := bolt.Lock(db, RestoreLockTimeout)
		if err != nil {
			return r, err
		}
		defer unlock()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return r, err
	}
	tmp, err := copyIn(file, dir)
	if err != nil {
		return r, err
	}
	placed := false
	defer func() {
		if !placed {
			_ = os.Remove(tmp)
		}
	}()
	// What is checked is the copy that is put in place, not the file
	// again; its faults are the file's.
	if r.Summary, err = bolt.Verify(ctx, tmp); err != nil {
		var d *bolt.DamagedError
		if errors.As(err, &d) {
			d.Path = file
		}
		return r, err
	}
	if exists {
		r.Aside = db + ".before-restore-" + now.UTC().Format(nameLayout)
		if err := keepAside(db, r.Aside); err != nil {
			return Restored{}, fmt.Errorf("cannot keep the current database as %s, so nothing was changed: %w", r.Aside, err)
		}
	}
	if err := os.Rename(tmp, db); err != nil {
		return r, fmt.Errorf("cannot put the backup in place of %s, which is unchanged: %w", db, err)
	}
	placed = true
	if err := syncDir(dir); err != nil {
		return r, fmt.Errorf("restored, but syncing %s failed: %w", dir, err)
	}
	return r, nil
}

// copyIn copies file into a synced temporary file in dir and returns its
// name.
func copyIn(file, dir string) (string, error) {
	src, err := openSource(file)
	if err != nil {
		return "", err
	}
	defer src.Close()
	if info, err := src.Stat(); err != nil {
		return "", err
	} else if !info.Mode().IsRegular() {
		return "", &bolt.DamagedError{Path: file, Why: "it is not a regular file"}
	}
	dst, err := os.CreateTemp(dir, ".parley-restore-*.tmp")
	if err != nil {
		return "", fmt.Errorf("cannot write in the data directory %s: %w", dir, err)
	}
	_, err = io.Copy(dst, src)
	if err == nil {
		err = dst.Sync()
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(dst.Name())
		return "", fmt.Errorf("cannot copy %s into %s: %w", file, dir, err)
	}
	return dst.Name(), nil
}

// keepAside gives db's file the name aside too, without copying it where
// the file system has hard links (elsewhere it copies it: Restore holds
// its lock, so nothing writes it meanwhile). An existing aside is
// refused.
func keepAside(db, aside string) error {
	err := os.Link(db, aside)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(db), ".parley-aside-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	src, err := os.Open(db)
	if err == nil {
		_, err = io.Copy(f, src)
		src.Close()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if _, err := os.Lstat(aside); err == nil {
		return fs.ErrExist
	}
	return os.Rename(f.Name(), aside)
}
