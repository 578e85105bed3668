package backup

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"
)

// Daily backups (see the package documentation).
const (
	// Every is the age of the newest backup at which the next is taken,
	// and doctor's limit.
	Every = 24 * time.Hour
	// CheckEvery is how often Daily looks at the newest backup's age.
	CheckEvery = time.Hour
)

// Daily takes a backup into Dir whenever the newest there is Every old,
// and keeps the newest Keep. parley serve runs one when [store] backup_dir
// is set.
type Daily struct {
	// Dir is [store] backup_dir; it is created (0700) when missing.
	Dir string
	// Keep is how many backups are kept ([store] backup_keep).
	Keep int
	// Source makes the copies: a Spooler, so that a slow backup_dir (a
	// network share, a USB disk) never holds the database's read
	// transaction.
	Source Source
	// Logger receives what was taken and what failed.
	Logger *slog.Logger
}

// Run looks at once, then every CheckEvery, until ctx ends.
func (d *Daily) Run(ctx context.Context) {
	t := time.NewTicker(CheckEvery)
	defer t.Stop()
	for {
		if err := d.Once(ctx); err != nil && ctx.Err() == nil {
			d.Logger.Error("the daily backup failed; it is tried again in an hour", "dir", d.Dir, "err", err,
				"fix", "check that [store] backup_dir exists, is the parley user's, and has room; parley backup takes one by hand")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Once takes a backup if the newest in Dir is Every old or there is none,
// then deletes the oldest beyond Keep.
func (d *Daily) Once(ctx context.Context) error {
	if err := os.MkdirAll(d.Dir, 0o700); err != nil {
		return err
	}
	list, err := List(d.Dir)
	if err != nil {
		return err
	}
	now := time.Now()
	if e, ok := Newest(list, now); ok && now.Sub(e.Time) < Every {
		return nil
	}
	sweepTemps(d.Dir, now)
	dest := filepath.Join(d.Dir, Name(now))
	sum, err := Write(ctx, dest, false, func(f *os.File) error {
		rc, size, err := d.Source.Backup(ctx)
		if err != nil {
			return err
		}
		defer rc.Close()
		n, err := io.Copy(f, rc)
		if err == nil && n != size {
			err = fmt.Errorf("the copy has %d of its %d bytes", n, size)
		}
		return err
	})
	if err != nil {
		return err
	}
	d.Logger.Info("backup taken", "file", dest, "sessions", sum.Sessions, "messages", sum.Messages, "bytes", sum.Size)
	gone, err := Prune(d.Dir, d.Keep)
	for _, g := range gone {
		d.Logger.Info("old backup deleted", "file", g, "keep", d.Keep)
	}
	return err
}

// sweepTemps removes the temporary files of backups that a killed process
// left in dir a day ago or more: a younger one may be a backup being
// written now.
func sweepTemps(dir string, now time.Time) {
	matches, _ := filepath.Glob(filepath.Join(dir, tempPattern))
	for _, m := range matches {
		if info, err := os.Lstat(m); err == nil && info.Mode().IsRegular() && now.Sub(info.ModTime()) >= Every {
			_ = os.Remove(m)
		}
	}
}
