package serve

import (
	"context"

	"github.com/parley-chat/parley/cmd/parley/internal/backup"
	"github.com/parley-chat/parley/store/bolt"
)

// openBackups wires the backups of a bbolt store (package backup): it
// writes the data directory's backup key, gives /api/backup a spooler of
// the store's copies, and, with [store] backup_dir, prepares the daily
// backups Run runs. A PostgreSQL store has none of it: pg_dump backs it up.
// A key that cannot be written only costs `parley backup` of the running
// parley, so it is a warning.
func (m *Main) openBackups() {
	st, ok := m.daemon.Store.(*bolt.Store)
	if !ok {
		return
	}
	dir := m.Config.DataDir
	log := m.Logger.With("component", "backup")
	if err := backup.SweepSpools(dir); err != nil {
		log.Warn("cannot remove what an earlier run left of a backup", "dir", dir, "err", err)
	}
	key, err := backup.WriteKey(dir)
	if err != nil {
		log.Warn("parley backup cannot copy this running parley's database", "err", err,
			"fix", "make the data directory writable by the user parley runs as, and restart it")
	}
	spool := backup.Spooler{Dir: dir, Take: st.Backup}
	m.web.SetBackup(spool, key)
	if c := m.Config.Store; c.BackupDir != "" {
		m.daily = &backup.Daily{Dir: c.BackupDir, Keep: int(c.BackupKeep), Source: spool, Logger: log}
	}
}

// runBackups takes the daily backups until ctx ends, when [store]
// backup_dir is set.
func (m *Main) runBackups(ctx context.Context) {
	if m.daily != nil {
		m.daily.Run(ctx)
	}
}
