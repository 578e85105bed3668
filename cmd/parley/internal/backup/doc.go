// Package backup keeps copies of parley's bbolt database: the file that
// `parley backup` and the daily backups of `parley serve` write, the key
// that lets the operator ask a running parley for a copy, and `parley
// restore`. PostgreSQL is backed up with its own tools (pg_dump); nothing
// here applies to it.
//
// # A backup is whole or absent
//
// Write fills a temporary file next to the destination, syncs it, checks
// it as a parley database (bolt.Verify: every page, parley's buckets and
// schema) and only then gives it the destination's name (a hard link,
// which refuses an existing name, unless replacing was asked for: then a
// rename), and syncs the directory. Whatever happens on the way, kill -9
// included, the destination is either absent or a whole, sound database;
// what may be left is a temporary file named .parley-backup-*.tmp.
//
// # Where the copy comes from
//
// A running parley holds the file's lock, so `parley backup` first tries
// to read the file itself under bbolt's shared lock (bolt.BackupFile) and,
// when a parley holds it, asks that parley (POST /api/backup, package
// web), which copies it in one read transaction (bolt.Store.Backup) into
// a spool file in the data directory, unlinked as soon as it is created so
// that nothing is left behind whatever happens to the process, and sends
// that. The request carries the data directory's key (KeyFile), which the
// daemon writes at start, readable by the owner of the data directory
// only: whoever can read it could read the database file anyway, and a
// parley at the address with another data directory refuses it.
//
// # Daily backups
//
// With [store] backup_dir set, parley serve keeps backups there by itself
// (Daily): at start and then every hour it looks at the newest backup's
// time, which is in its name (parley-YYYYMMDDTHHMMSSZ.db, UTC), and takes
// one when that is a day old or there is none; then it deletes the oldest
// beyond [store] backup_keep. The copy is spooled in the data directory
// first, as for /api/backup, so a slow backup_dir (a network share) never
// holds the database's read transaction. Only files named that way are counted or
// deleted; `parley backup` without a FILE writes the same names there. A
// file named with a time in the future (a clock that was wrong) does not
// count as the newest, so it cannot stop the backups. A failure is logged
// with its fix and tried again an hour later; `parley doctor` says when
// the newest backup is older than a day.
//
// # Restore
//
// Restore takes the running parley's lock on the data directory's
// database first (bolt.Lock), so it refuses while a parley runs, and holds
// it to the end. It copies the backup into the data directory, syncs and
// checks the copy (what is checked is what is put in place), keeps the old
// database under a new name (a hard link,
// parley.db.before-restore-YYYYMMDDTHHMMSSZ), renames the copy over
// parley.db and syncs the directory: at every instant parley.db is the
// old file or the new one, whole. A parley starting meanwhile waits for
// the lock and then opens the new file (see store/bolt's openDB). A data
// directory with no database has no lock to take; restoring into one is
// for a parley that is not started until it is done.
package backup
