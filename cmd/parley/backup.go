package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/cmd/parley/internal/backup"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// `parley backup` and `parley restore`: package backup has the design.

const backupUsage = `Usage:
  parley backup [FILE] [--force] [--config FILE] [--data-dir DIR] [--url URL] [--token TOKEN]
      a consistent copy of the database, from the running parley or, when
      none runs, from the file; without FILE into [store] backup_dir; FILE
      may be a directory. An existing FILE is replaced only with --force.
  parley restore FILE [--config FILE] [--data-dir DIR]
      FILE becomes the data directory's database, the old one kept beside
      it; parley must be stopped.
With [store] url (PostgreSQL) both print the pg_dump / pg_restore command to use.
`

// directLock is how long `parley backup` waits for the database's lock
// before it concludes that a parley runs on it and asks that parley.
const directLock = 200 * time.Millisecond

// backupCmd is `parley backup`.
func backupCmd(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, backupUsage) }
	force := fs.Bool("force", false, "replace FILE if it exists")
	base := fs.String("url", "", "the running parley's `URL` (default http://<http.listen>)")
	token := fs.String("token", "", "bearer `token` (default http.token)")
	cfg, pos, code := commandConfig(fs, args, env, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) > 1 {
		fmt.Fprint(stderr, backupUsage)
		return exitUsage
	}
	now := time.Now()
	if cfg.Store.URL != "" {
		dest := "parley.dump"
		switch {
		case len(pos) == 1:
			dest = pos[0]
		case cfg.Store.BackupDir != "":
			dest = filepath.Join(cfg.Store.BackupDir, strings.TrimSuffix(backup.Name(now), ".db")+".dump")
		}
		pgAdvice(stdout, cfg.Store.URL, dest, false)
		return exitUsage
	}
	dest, err := backupDest(pos, cfg.Store.BackupDir, now)
	if err != nil {
		fmt.Fprintln(stderr, "parley backup:", err)
		return exitUsage
	}
	db := filepath.Join(cfg.DataDir, daemon.DBFile)
	if _, err := os.Stat(db); err != nil {
		fmt.Fprintf(stderr, "parley backup: no database to back up: %v (is data_dir, PARLEY_DATA_DIR or --data-dir right?)\n", err)
		return exitFailed
	}
	if *base == "" {
		*base = "http://" + dialable(cfg.HTTP.Listen)
	}
	if *token == "" {
		*token = cfg.HTTP.Token
	}
	from := "from " + db + " (no parley was running on it)"
	sum, err := backup.Write(ctx, dest, *force, func(f *os.File) error {
		_, err := bolt.BackupFile(ctx, db, f, directLock)
		if !errors.Is(err, bolt.ErrInUse) {
			return err
		}
		// A parley holds it: that parley makes the copy.
		from = "from the parley running at " + *base
		if err := f.Truncate(0); err != nil {
			return err
		}
		key, err := backup.ReadKey(cfg.DataDir)
		if err != nil {
			return err
		}
		_, err = web.BackupClient{Base: *base, Token: *token, Key: key}.Fetch(ctx, f)
		if err != nil {
			return fmt.Errorf("a parley holds %s, and asking it at %s for a copy failed: %w (give its address with --url, its token with --token)", db, *base, err)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintf(stderr, "parley backup: %v\nNothing was written to %s.\n", err, dest)
		return exitFailed
	}
	fmt.Fprintf(stdout, "backed up %s to %s: %d sessions, %d messages, %s\n", from, dest, sum.Sessions, sum.Messages, byteSize(sum.Size))
	return exitOK
}

// backupDest is where `parley backup` writes: FILE, a new file in FILE
// when it is a directory, or one in backup_dir.
func backupDest(pos []string, backupDir string, now time.Time) (string, error) {
	switch {
	case len(pos) == 1:
		if info, err := os.Stat(pos[0]); err == nil && info.IsDir() {
			return filepath.Join(pos[0], backup.Name(now)), nil
		}
		return pos[0], nil
	case backupDir != "":
		if err := os.MkdirAll(backupDir, 0o700); err != nil {
			return "", fmt.Errorf("[store] backup_dir: %w", err)
		}
		return filepath.Join(backupDir, backup.Name(now)), nil
	}
	return "", errors.New("give a FILE to write the backup to, or set [store] backup_dir (PARLEY_STORE_BACKUP_DIR)")
}

// restoreCmd is `parley restore FILE`.
func restoreCmd(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, backupUsage) }
	cfg, pos, code := commandConfig(fs, args, env, stderr)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		fmt.Fprint(stderr, backupUsage)
		return exitUsage
	}
	file := pos[0]
	if cfg.Store.URL != "" {
		pgAdvice(stdout, cfg.Store.URL, file, true)
		return exitUsage
	}
	db := filepath.Join(cfg.DataDir, daemon.DBFile)
	r, err := backup.Restore(ctx, file, db, time.Now())
	var damaged *bolt.DamagedError
	switch {
	case errors.Is(err, bolt.ErrInUse):
		fmt.Fprintf(stderr, "parley restore: a parley is running on %s: stop it first (systemctl --user stop parley, or however it was started), then run parley restore again.\nNothing was changed.\n", cfg.DataDir)
		return exitFailed
	case errors.As(err, &damaged):
		fmt.Fprintf(stderr, "parley restore: %s.\nNothing was changed: give a backup parley backup wrote (parley doctor checks a data directory).\n", damaged.Problem())
		return exitFailed
	case errors.Is(err, core.ErrSchemaTooNew):
		fmt.Fprintf(stderr, "parley restore: %s was written by a newer parley (%v): restore it with that parley.\nNothing was changed.\n", file, err)
		return exitFailed
	case err != nil:
		fmt.Fprintf(stderr, "parley restore: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "restored %s into %s: %d sessions, %d messages, %s\n", file, db, r.Sessions, r.Messages, byteSize(r.Size))
	if r.Aside != "" {
		fmt.Fprintf(stdout, "The database it replaced is kept as %s; delete it once parley runs as it should.\n", r.Aside)
	}
	return exitOK
}

// commandConfig parses the flags of a command whose positional arguments
// may come before or after them, adding --config and --data-dir, and
// loads the configuration. code is the exit code to return at once, or -1.
func commandConfig(fs *flag.FlagSet, args, env []string, stderr io.Writer) (cfg config.Config, pos []string, code int) {
	configPath := fs.String("config", "", "TOML configuration `file` (PARLEY_CONFIG)")
	dataDir := fs.String("data-dir", "", "data `directory` (PARLEY_DATA_DIR)")
	for {
		if err := fs.Parse(args); err != nil {
			return cfg, nil, exitUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *dataDir != "" {
		env = append(env, "PARLEY_DATA_DIR="+*dataDir)
	}
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	cfg, err := loadConfig(*configPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "parley: invalid configuration:\n%s\n", indent(err.Error()))
		return cfg, nil, exitUsage
	}
	return cfg, pos, -1
}

// byteSize says a size for people.
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
