package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/backup"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
)

// checkBackups says, when [store] backup_dir is set, how old the newest
// backup there is: a failure when there is none or it is a day old
// (backup.Every), with the fix. With PostgreSQL the directory is not used.
func (c *checkup) checkBackups() finding {
	const check = "backups"
	dir := c.cfg.Store.BackupDir
	if c.cfg.Store.URL != "" {
		return finding{Check: check, OK: true, Detail: "[store] backup_dir is not used: the state is in PostgreSQL, which pg_dump backs up (parley backup prints the command)"}
	}
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	fixDir := fmt.Sprintf("make %s a directory the user parley runs as can write (mkdir -p %s), or correct [store] backup_dir (PARLEY_STORE_BACKUP_DIR)", dir, dir)
	if info, err := os.Stat(dir); err == nil && !info.IsDir() {
		return finding{Check: check, Problem: fmt.Sprintf("[store] backup_dir %s is not a directory", dir), Fix: fixDir}
	}
	list, err := backup.List(dir)
	if err != nil {
		return finding{Check: check, Problem: err.Error(), Fix: fixDir}
	}
	newest, ok := backup.Newest(list, now)
	if !ok {
		if _, err := os.Stat(filepath.Join(c.cfg.DataDir, daemon.DBFile)); errors.Is(err, fs.ErrNotExist) {
			return finding{Check: check, OK: true, Detail: "no database yet, so no backup in " + dir + "; parley serve takes one there a day"}
		}
		return finding{Check: check, Problem: "there is no backup in " + dir + " ([store] backup_dir)",
			Fix: "take one now with parley backup; parley serve takes one there a day while it runs"}
	}
	age := now.Sub(newest.Time)
	name := filepath.Base(newest.Path)
	if age >= backup.Every {
		return finding{Check: check, Problem: fmt.Sprintf("the newest backup in %s, %s, was taken %s ago", dir, name, ago(age)),
			Fix: `take one now with parley backup; parley serve takes one a day while it runs: if it ran meanwhile, its log says why it did not ("the daily backup failed")`}
	}
	return finding{Check: check, OK: true, Detail: fmt.Sprintf("the newest backup in %s, %s, was taken %s ago; %d kept, at most %d",
		dir, name, ago(age), len(list), c.cfg.Store.BackupKeep)}
}

// ago says a duration for people, in minutes, hours or days.
func ago(d time.Duration) string {
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return "moments"
}
