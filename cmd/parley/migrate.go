package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/postgres"
)

// migrateCmd is `parley migrate --from DATA_DIR [--config FILE]`: it copies
// the state a bbolt data directory holds (sessions with their bindings, the
// inbox with its ids and dedup keys, the event log, the delivery journal,
// the cleanup ledger, cursors, pairing) into the PostgreSQL database [store]
// url names, for an operator who grows out of one machine, then counts
// every kind on both sides and prints the counts.
//
// Decisions: the target must hold no parley data (a second run, or a
// database another parley already writes, is refused before anything is
// written: merging two stores would mix their ids); the copy is one
// transaction, so a failure leaves the database empty; the source is
// opened with bbolt's file lock, so a parley still serving the directory
// makes migrate fail at once rather than copy a store that changes under
// it. Received and generated files stay in the data directory, which the
// PostgreSQL-backed parley goes on using for files.
func migrateCmd(ctx context.Context, args, env []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("parley migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath := fs.String("config", "", "TOML configuration `file` naming the target in [store] url (default: none; PARLEY_CONFIG)")
	from := fs.String("from", "", "the data `directory` whose bbolt store is copied (required)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "parley migrate: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *from == "" {
		fmt.Fprintln(stderr, "parley migrate: --from DATA_DIR is required: the data directory whose store is copied (the data_dir parley served it from)")
		return exitUsage
	}
	if *configPath == "" {
		*configPath = lookup(env, "PARLEY_CONFIG")
	}
	cfg, err := loadConfig(*configPath, env)
	if err != nil {
		fmt.Fprintf(stderr, "parley: invalid configuration:\n%s\n", indent(err.Error()))
		return exitUsage
	}
	if cfg.Store.URL == "" {
		fmt.Fprintln(stderr, "parley migrate: no target: set [store] url or PARLEY_STORE_URL to the PostgreSQL database to copy into, like postgres://parley:PASSWORD@127.0.0.1:5432/parley")
		return exitUsage
	}
	counts, err := migrate(ctx, *from, cfg.Store.URL, stdout)
	if len(counts) > 0 {
		printCounts(stdout, counts)
	}
	if err != nil {
		fmt.Fprintf(stderr, "parley migrate: %v\n", err)
		if errors.Is(err, store.ErrCountMismatch) {
			fmt.Fprintln(stderr, "parley migrate: THE COPY IS INCOMPLETE: do not start parley on this database; empty it (or create a new one) and run parley migrate again, with no parley running on the data directory")
		}
		return exitFailed
	}
	fmt.Fprintf(stdout, "copied %s into the database of [store] url; every count matches.\n", *from)
	fmt.Fprintln(stdout, "Start parley serve with this configuration: it keeps its state there, and its files in data_dir.")
	return exitOK
}

// migrate copies the store of the data directory dir into the PostgreSQL
// database at url. Its errors name the fix.
func migrate(ctx context.Context, dir, url string, stdout io.Writer) ([]store.KindCount, error) {
	db := filepath.Join(dir, daemon.DBFile)
	if _, err := os.Stat(db); errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no parley store (no %s): give --from the data_dir parley served from", dir, daemon.DBFile)
	} else if err != nil {
		return nil, err
	}
	src, err := bolt.Open(db, bolt.Options{LockTimeout: time.Second})
	switch {
	case errors.Is(err, bolt.ErrInUse):
		return nil, fmt.Errorf("a parley is serving %s (it holds the database's lock): stop it first, then run parley migrate again; the copy must not change while it is made", dir)
	case errors.Is(err, core.ErrSchemaTooNew):
		return nil, fmt.Errorf("%s was written by a newer parley: %w; migrate with that parley (or a newer one)", db, err)
	case err != nil:
		return nil, err
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, url, postgres.Options{})
	if err != nil {
		return nil, fmt.Errorf("the database of [store] url: %w (check that PostgreSQL runs and the url's user, password and database are right; parley doctor says more)", err)
	}
	defer dst.Close()
	fmt.Fprintf(stdout, "copying %s into the database of [store] url…\n", db)
	counts, err := store.Copy(ctx, dst, src)
	if errors.Is(err, store.ErrNotEmpty) {
		return nil, fmt.Errorf("the database of [store] url already holds parley data, and migrate copies into an empty database only (merging two stores would mix their ids): point [store] url at a new database (createdb), or drop this one's tables if its data is not needed")
	}
	return counts, err
}

// printCounts writes a table of the records per kind on both sides.
func printCounts(w io.Writer, counts []store.KindCount) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "kind\tbbolt\tpostgres\t")
	for _, c := range counts {
		mark := ""
		if c.Source != c.Target {
			mark = "  MISMATCH"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", c.Kind, c.Source, c.Target, mark)
	}
	tw.Flush()
}
