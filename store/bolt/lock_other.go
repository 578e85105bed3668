//go:build !unix

package bolt

import (
	"errors"
	"fmt"
	"os"
	"runtime"
)

// lockFile is unix-only: parley runs on Linux and macOS, and bbolt locks
// differently elsewhere (LockFileEx on Windows). Lock then fails rather
// than let parley restore replace a file without knowing whether a parley
// runs on it.
func lockFile(*os.File) error {
	return fmt.Errorf("locking the database is not supported on %s: %w", runtime.GOOS, errors.ErrUnsupported)
}

// shareFile is unix-only, as lockFile: elsewhere checkFile reads the
// header pages without it, as before.
func shareFile(*os.File) error { return nil }
