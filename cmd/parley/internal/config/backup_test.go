package config

import (
	"strings"
	"testing"
)

// [store] backup_dir: absolute, "~/" expanded, from the environment too;
// backup_keep: at least 1.
func TestBackupKeys(t *testing.T) {
	if c := load(t, "", append(home, "PARLEY_STORE_BACKUP_DIR=~/bk", "PARLEY_STORE_BACKUP_KEEP=3")); c.Store.BackupDir != "/home/ada/bk" || c.Store.BackupKeep != 3 {
		t.Fatalf("from the environment: %q, %d", c.Store.BackupDir, c.Store.BackupKeep)
	}
	if _, msg := loadErr(t, "[store]\nbackup_dir = \"backups\"\n", home); !strings.Contains(msg, `store.backup_dir: "backups" is not an absolute path`) ||
		!strings.Contains(msg, "PARLEY_STORE_BACKUP_DIR") {
		t.Errorf("error %q does not name the key, the value and the fix", msg)
	}
	if _, msg := loadErr(t, "[store]\nbackup_keep = 0\n", home); !strings.Contains(msg, "store.backup_keep: 0; at least 1 (default 7)") {
		t.Errorf("error %q", msg)
	}
}
