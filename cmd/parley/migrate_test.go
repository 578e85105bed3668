package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/postgres"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// runMigrate runs parley migrate with env and returns its exit code and
// output.
func runMigrate(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), append([]string{"migrate"}, args...), env, nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

// parley migrate copies a data directory into the database [store] url
// names and prints the counts; it refuses a second copy into the now
// non-empty database, a data directory a parley serves, and a missing
// target, each saying what to do.
func TestMigrateCommand(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := bolt.Open(filepath.Join(dir, daemon.DBFile), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s := storetest.CreateSession(t, b, core.Session{Title: "moved"})
	for _, text := range []string{"one", "two"} {
		if _, err := b.Append(ctx, core.Append{Message: core.Message{Session: s.ID, Role: core.RoleUser, Content: text},
			DedupKey: "telegram\x00" + text}); err != nil {
			t.Fatal(err)
		}
	}
	srv := pgtest.Start(t)
	env := []string{"HOME=" + t.TempDir(), "PARLEY_STORE_URL=" + srv.URL}

	// While "a parley" holds the data directory, migrate refuses it.
	code, _, errOut := runMigrate(t, env, "--from", dir)
	if code != exitFailed || !strings.Contains(errOut, "a parley is serving "+dir) || !strings.Contains(errOut, "stop it first") {
		t.Errorf("with the store in use: exit %d, %s", code, errOut)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runMigrate(t, env, "--from", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, out, errOut)
	}
	t.Logf("parley migrate:\n%s", out)
	for _, row := range []string{`sessions\s+1\s+1`, `messages\s+2\s+2`, `dedup keys\s+2\s+2`, `every count matches`} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("output does not show %s:\n%s", row, out)
		}
	}
	p, err := postgres.Open(ctx, srv.URL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := p.Inbox(ctx, s.ID, "", 0)
	p.Close()
	if err != nil || len(msgs) != 2 || msgs[1].Content != "two" {
		t.Errorf("the database's inbox: %+v, %v", msgs, err)
	}

	code, _, errOut = runMigrate(t, env, "--from", dir)
	if code != exitFailed || !strings.Contains(errOut, "already holds parley data") {
		t.Errorf("second migrate: exit %d, %s", code, errOut)
	}

	code, _, errOut = runMigrate(t, []string{"HOME=" + t.TempDir()}, "--from", dir)
	if code != exitUsage || !strings.Contains(errOut, "set [store] url or PARLEY_STORE_URL") {
		t.Errorf("without a target: exit %d, %s", code, errOut)
	}
	code, _, errOut = runMigrate(t, env, "--from", t.TempDir())
	if code != exitFailed || !strings.Contains(errOut, "holds no parley store") {
		t.Errorf("from an empty directory: exit %d, %s", code, errOut)
	}
}
