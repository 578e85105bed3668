package config

import (
	"fmt"
	"path/filepath"
)

// DefaultBackupKeep is how many backups [store] backup_dir keeps by
// default: a week of daily ones.
const DefaultBackupKeep = 7

// validateBackups checks [store] backup_dir and backup_keep.
func (s Store) validateBackups(report func(key, problem string)) {
	if s.BackupDir != "" && !filepath.IsAbs(s.BackupDir) {
		report("backup_dir", fmt.Sprintf("%q is not an absolute path; write it like /var/backups/parley or ~/parley-backups", s.BackupDir))
	}
	if s.BackupKeep < 1 {
		report("backup_keep", fmt.Sprintf("%d; at least 1 (default %d)", s.BackupKeep, DefaultBackupKeep))
	}
}
