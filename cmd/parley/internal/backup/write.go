package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/parley-chat/parley/store/bolt"
)

// ErrExists is Write's refusal of a destination that exists.
var ErrExists = errors.New("the file exists")

// tempPattern names Write's temporary files, next to the destination.
const tempPattern = ".parley-backup-*.tmp"

// Write puts a backup at dest (see the package documentation): fill
// writes the database into a temporary file next to dest, which is then
// synced, checked with bolt.Verify and given dest's name. It refuses a
// dest that exists with ErrExists unless replace is set. On any failure
// dest is left as it was and the temporary file removed; on success it
// returns what Verify found.
func Write(ctx context.Context, dest string, replace bool, fill func(*os.File) error) (bolt.Summary, error) {
	var sum bolt.Summary
	if _, err := os.Lstat(dest); err == nil && !replace {
		return sum, fmt.Errorf("%s: %w (give another name, or --force to replace it)", dest, ErrExists)
	}
	dir := filepath.Dir(dest)
	f, err := os.CreateTemp(dir, tempPattern)
	if err != nil {
		return sum, fmt.Errorf("cannot write in %s: %w", dir, err)
	}
	tmp := f.Name()
	placed := false
	defer func() {
		if !placed {
			_ = os.Remove(tmp)
		}
	}()
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sum, err
	}
	if sum, err = bolt.Verify(ctx, tmp); err != nil {
		return sum, fmt.Errorf("the copy does not check out, so it was not kept: %w", err)
	}
	if err := place(tmp, dest, replace); err != nil {
		return sum, err
	}
	placed = true
	if err := syncDir(dir); err != nil {
		return sum, fmt.Errorf("%s written, but syncing its directory failed: %w", dest, err)
	}
	return sum, nil
}

// place gives tmp the name dest. Without replace a hard link does it,
// which refuses an existing dest whatever made it meanwhile; on a file
// system without hard links it falls back to a rename after a look.
func place(tmp, dest string, replace bool) error {
	if replace {
		if err := os.Rename(tmp, dest); err != nil {
			return fmt.Errorf("cannot put the backup at %s: %w", dest, err)
		}
		return nil
	}
	err := os.Link(tmp, dest)
	switch {
	case err == nil:
		_ = os.Remove(tmp)
		return nil
	case errors.Is(err, fs.ErrExist):
		return fmt.Errorf("%s: %w (give another name, or --force to replace it)", dest, ErrExists)
	}
	if _, serr := os.Lstat(dest); serr == nil {
		return fmt.Errorf("%s: %w (give another name, or --force to replace it)", dest, ErrExists)
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("cannot put the backup at %s: %w", dest, err)
	}
	return nil
}

// syncDir makes the names in dir durable: a rename or link is not until
// its directory is synced.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
