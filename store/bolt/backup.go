package bolt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// Backups (see the package documentation): a consistent copy of the file,
// taken from the running Store or from a file no process holds, and the
// check that a file is a sound parley database before it is kept or put
// in place.

// Backup writes a consistent copy of the whole database to w: the file as
// one read transaction sees it (bbolt's Tx.WriteTo), a database of its own
// that opens without recovery. It returns the bytes written. Writes go on
// meanwhile, with one exception: a commit that must grow the file's memory
// map waits until the copy ends (bbolt remaps under a lock every read
// transaction holds), so w should take the bytes at the speed of a local
// disk, never at a network client's pace. ctx ending stops the copy.
func (s *Store) Backup(ctx context.Context, w io.Writer) (int64, error) {
	var n int64
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		var err error
		n, err = tx.WriteTo(ctxWriter{ctx, w})
		return err
	})
	if err != nil {
		return n, fmt.Errorf("bolt: backup: %w", err)
	}
	return n, nil
}

// BackupFile writes a consistent copy of the database file at path to w,
// for when no process runs on it: it opens the file read-only, which takes
// the lock bbolt shares among readers, and fails with ErrInUse when a
// writer (a running parley) holds it for longer than lockTimeout; that
// parley's Store.Backup is then the way. A file that does not exist is an
// error wrapping fs.ErrNotExist.
func BackupFile(ctx context.Context, path string, w io.Writer, lockTimeout time.Duration) (int64, error) {
	if _, err := os.Stat(path); err != nil {
		return 0, fmt.Errorf("bolt: backup: %w", err)
	}
	db, _, err := openDB(path, bbolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if err != nil {
		return 0, err
	}
	defer func() { _ = guard(path, db.Close) }()
	var n int64
	err = guard(path, func() error {
		return db.View(func(tx *bbolt.Tx) error {
			var err error
			n, err = tx.WriteTo(ctxWriter{ctx, w})
			return err
		})
	})
	if err != nil {
		return n, fmt.Errorf("bolt: backup %s: %w", path, err)
	}
	return n, nil
}

// ctxWriter fails its writes once ctx has ended, so that a copy stops.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// Summary is what Verify found in a sound database.
type Summary struct {
	// Schema is the file's layout version (SchemaVersion or older).
	Schema int
	// Sessions and Messages count the sessions and inbox messages.
	Sessions, Messages int
	// Size is the file's size in bytes.
	Size int64
}

// Verify checks that the file at path is a sound parley database without
// changing it: the header pages (as Open), then every page (as
// Store.Check), then that it holds parley's buckets with a schema version
// this parley reads. It opens the file read-only, sharing the lock with
// other readers, so a file a running parley holds is ErrInUse. A damaged
// file, or one that is not a parley database (another program's bbolt
// file, anything else), is a *DamagedError; one a newer parley wrote is an
// error wrapping core.ErrSchemaTooNew.
func Verify(ctx context.Context, path string) (Summary, error) {
	var sum Summary
	info, err := os.Stat(path)
	if err != nil {
		return sum, fmt.Errorf("bolt: verify: %w", err)
	}
	if !info.Mode().IsRegular() {
		return sum, &DamagedError{Path: path, Why: "it is not a regular file"}
	}
	sum.Size = info.Size()
	db, _, err := openDB(path, bbolt.Options{ReadOnly: true, Timeout: DefaultLockTimeout})
	if err != nil {
		return sum, err
	}
	defer func() { _ = guard(path, db.Close) }()
	var why string
	err = guard(path, func() error {
		return db.View(func(tx *bbolt.Tx) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if why = checkTx(tx); why != "" {
				return nil
			}
			sum.Schema, why, err = parleySchema(tx)
			if why != "" || err != nil {
				return err
			}
			sum.Sessions = tx.Bucket(bucketSessions).Stats().KeyN
			sum.Messages = tx.Bucket(bucketInbox).Stats().KeyN
			return nil
		})
	})
	switch {
	case err != nil:
		return sum, err
	case why != "":
		return sum, &DamagedError{Path: path, Why: why}
	}
	return sum, nil
}

// parleySchema reads the schema version of a parley database, or says why
// the transaction's file is not one. Version 1 files lack the buckets
// version 2 added; Open adds them.
func parleySchema(tx *bbolt.Tx) (int, string, error) {
	const notOurs = "it is a bbolt database, but not parley's"
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, notOurs + " (it has no meta bucket)", nil
	}
	v := meta.Get(keySchema)
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, fmt.Sprintf("%s (its schema version %q is unreadable)", notOurs, v), nil
	}
	if n > SchemaVersion {
		return n, "", fmt.Errorf("file has schema version %d, this parley reads up to %d: %w", n, SchemaVersion, core.ErrSchemaTooNew)
	}
	for _, name := range [][]byte{bucketSessions, bucketInbox, bucketEvents, bucketCursors} {
		if tx.Bucket(name) == nil {
			return n, fmt.Sprintf("%s (it has no %s bucket)", notOurs, name), nil
		}
	}
	return n, "", nil
}

// Lock takes the lock a running parley holds on the database file at path
// (bbolt's: exclusive, on the open file), waiting at most timeout, without
// reading the file, which may be damaged: ErrInUse when a process holds it
// longer. parley restore holds it while it puts another file in place, so
// that no parley starts on the old file meanwhile (and one waiting for it
// opens the new file: see openDB). unlock releases it. A file that does
// not exist is an error wrapping fs.ErrNotExist.
func Lock(path string, timeout time.Duration) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("bolt: lock: %w", err)
	}
	deadline := time.Now().Add(timeout)
	for {
		err := lockFile(f)
		if err == nil {
			return f.Close, nil // closing the file releases the lock
		}
		if !errors.Is(err, errLocked) || time.Now().After(deadline) {
			_ = f.Close()
			if errors.Is(err, errLocked) {
				return nil, fmt.Errorf("bolt: lock %s: %w", path, ErrInUse)
			}
			return nil, fmt.Errorf("bolt: lock %s: %w", path, err)
		}
		time.Sleep(lockPoll)
	}
}

// errLocked is lockFile's answer when another open file holds the lock.
var errLocked = errors.New("locked")

// lockPoll is bbolt's own wait between tries of a lock.
const lockPoll = 50 * time.Millisecond
