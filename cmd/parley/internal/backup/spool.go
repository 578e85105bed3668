package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Source makes copies of the database to be read at the reader's pace;
// Spooler is one, and web.Backups is the same method.
type Source interface {
	// Backup takes a consistent copy of the whole database and returns
	// it to be read from its start, with its size in bytes. The caller
	// closes it.
	Backup(ctx context.Context) (io.ReadCloser, int64, error)
}

// spoolPattern names the spool files of Spooler, in the data directory.
const spoolPattern = ".parley-spool-*"

// Spooler takes a running parley's backups for POST /api/backup (it is a
// web.Backups) and the daily backups: Take copies the database into a spool file in Dir at disk
// speed, and the client reads the spool at its own pace, so a slow client
// never holds the database's read transaction.
type Spooler struct {
	// Dir is where the copy is spooled: the data directory, on the
	// database's file system.
	Dir string
	// Take writes a consistent copy of the database (bolt.Store.Backup).
	Take func(ctx context.Context, w io.Writer) (int64, error)
}

// Backup implements web.Backups. The spool file is unlinked as soon as it
// is made (where the system allows it: else when closed), so no copy of
// the database is left behind, whatever happens to the process.
func (s Spooler) Backup(ctx context.Context) (io.ReadCloser, int64, error) {
	f, err := os.CreateTemp(s.Dir, spoolPattern)
	if err != nil {
		return nil, 0, fmt.Errorf("backup: spool: %w", err)
	}
	sp := &spool{File: f, unlinked: os.Remove(f.Name()) == nil}
	bw := bufio.NewWriterSize(f, 1<<20)
	n, err := s.Take(ctx, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		_ = sp.Close()
		return nil, 0, fmt.Errorf("backup: spool: %w", err)
	}
	return sp, n, nil
}

// spool is a spool file, removed when closed if it could not be unlinked
// at once.
type spool struct {
	*os.File
	unlinked bool
}

func (s *spool) Close() error {
	err := s.File.Close()
	if !s.unlinked {
		_ = os.Remove(s.Name())
	}
	return err
}

// SweepSpools removes the spool files a parley that died left in dir
// (where a spool file could not be unlinked at once).
func SweepSpools(dir string) error {
	matches, err := filepath.Glob(filepath.Join(dir, spoolPattern))
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range matches {
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
