package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/cmd/parley/internal/backup"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/daemon"
	"github.com/parley-chat/parley/cmd/parley/internal/platforms"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// parley runs the command line with args and env (plus a HOME) and
// returns its exit code, standard output and standard error.
func parley(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Run(context.Background(), args, append([]string{"HOME=" + t.TempDir()}, env...), nil, &out, &errOut)
	return code, out.String(), errOut.String()
}

// dataDirWith makes a data directory whose database holds n sessions of
// one message each.
func dataDirWith(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	st, err := bolt.Open(filepath.Join(dir, daemon.DBFile), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i := range n {
		s, _, err := st.CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Append(ctx, core.Append{Message: core.Message{Session: s.ID, Role: core.RoleUser, Mime: core.MimeMarkdown, Content: "hello"}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// read reads a file.
func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// TestBackupAndRestoreStopped: with no parley running, parley backup
// copies the file itself, refuses to overwrite without --force, writes
// into a directory or backup_dir, and parley restore puts a backup in
// place of a database, keeping the old one.
func TestBackupAndRestoreStopped(t *testing.T) {
	t.Parallel()
	data := dataDirWith(t, 4)
	out := t.TempDir()
	file := filepath.Join(out, "b.db")
	code, stdout, stderr := parley(t, nil, "backup", file, "--data-dir", data)
	if code != exitOK || !strings.Contains(stdout, "no parley was running") || !strings.Contains(stdout, "4 sessions, 4 messages") {
		t.Fatalf("backup: exit %d\n%s%s", code, stdout, stderr)
	}
	first := read(t, file)
	code, _, stderr = parley(t, nil, "backup", "--data-dir", data, file)
	if code != exitFailed || !strings.Contains(stderr, "--force") || !bytes.Equal(read(t, file), first) {
		t.Errorf("backup over a file: exit %d, %s", code, stderr)
	}
	if code, stdout, stderr = parley(t, nil, "backup", "--force", file, "--data-dir", data); code != exitOK {
		t.Errorf("backup --force: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr = parley(t, nil, "backup", out, "--data-dir", data); code != exitOK || !strings.Contains(stdout, "/parley-") {
		t.Errorf("backup into a directory: exit %d\n%s%s", code, stdout, stderr)
	}
	backups := filepath.Join(t.TempDir(), "backups")
	code, stdout, stderr = parley(t, []string{"PARLEY_STORE_BACKUP_DIR=" + backups}, "backup", "--data-dir", data)
	if list, _ := backup.List(backups); code != exitOK || len(list) != 1 {
		t.Errorf("backup into backup_dir: exit %d, %d backups\n%s%s", code, len(list), stdout, stderr)
	}
	if code, _, stderr = parley(t, nil, "backup", "--data-dir", data); code != exitUsage || !strings.Contains(stderr, "backup_dir") {
		t.Errorf("backup with nowhere to write: exit %d, %s", code, stderr)
	}
	if code, _, stderr = parley(t, nil, "backup", file, "--data-dir", t.TempDir()); code != exitFailed || !strings.Contains(stderr, "no database to back up") {
		t.Errorf("backup of no database: exit %d, %s", code, stderr)
	}

	other := dataDirWith(t, 9)
	code, stdout, stderr = parley(t, nil, "restore", file, "--data-dir", other)
	if code != exitOK || !strings.Contains(stdout, "4 sessions, 4 messages") || !strings.Contains(stdout, "kept as "+filepath.Join(other, daemon.DBFile)+".before-restore-") {
		t.Fatalf("restore: exit %d\n%s%s", code, stdout, stderr)
	}
	if sum, err := bolt.Verify(context.Background(), filepath.Join(other, daemon.DBFile)); err != nil || sum.Sessions != 4 {
		t.Errorf("the restored database: %+v, %v", sum, err)
	}
}

// TestBackupOfARunningParley: a parley holds its database, so parley
// backup asks it, with the token and the data directory's key, and the
// copy is whole.
func TestBackupOfARunningParley(t *testing.T) {
	t.Parallel()
	cfg := startParley(t, "s3cret")
	env := []string{"PARLEY_DATA_DIR=" + cfg.DataDir, "PARLEY_HTTP_LISTEN=" + cfg.HTTP.Listen}
	file := filepath.Join(t.TempDir(), "b.db")
	if code, _, stderr := parley(t, env, "backup", file); code != exitFailed || !strings.Contains(stderr, "bearer token") || !strings.Contains(stderr, "--token") {
		t.Errorf("without the token: exit %d, %s", code, stderr)
	}
	code, stdout, stderr := parley(t, append(env, "PARLEY_HTTP_TOKEN=s3cret"), "backup", file)
	if code != exitOK || !strings.Contains(stdout, "from the parley running at http://"+cfg.HTTP.Listen) {
		t.Fatalf("backup: exit %d\n%s%s", code, stdout, stderr)
	}
	if _, err := bolt.Verify(context.Background(), file); err != nil {
		t.Fatal(err)
	}
	// restore refuses while it runs.
	code, _, stderr = parley(t, env, "restore", file)
	if code != exitFailed || !strings.Contains(stderr, "a parley is running on "+cfg.DataDir) || !strings.Contains(stderr, "Nothing was changed") {
		t.Errorf("restore under a running parley: exit %d, %s", code, stderr)
	}
	if got := dirNames(t, cfg.DataDir); slices.ContainsFunc(got, func(n string) bool { return strings.Contains(n, "restore") }) {
		t.Errorf("the data directory holds %q", got)
	}
}

// TestServeTakesBackups: parley serve with backup_dir takes a backup there
// at start (there is none yet), and writes the data directory's key for
// its owner only.
func TestServeTakesBackups(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.DataDir, cfg.HTTP.Listen = t.TempDir(), "127.0.0.1:0"
	cfg.Store.BackupDir = filepath.Join(t.TempDir(), "backups")
	m := servetest.Serve(t, &serve.Main{Config: cfg, Platforms: platforms.All()})
	servetest.AwaitStarted(t, m)
	var list []backup.Entry
	servetest.PollUntil(t, 30*time.Second, "the first backup", func() bool {
		list, _ = backup.List(cfg.Store.BackupDir)
		return len(list) == 1
	}, nil)
	if _, err := bolt.Verify(context.Background(), list[0].Path); err != nil {
		t.Error(err)
	}
	if info, err := os.Stat(filepath.Join(cfg.DataDir, backup.KeyFile)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v", backup.KeyFile, info, err)
	}
}

// TestBackupNeverPartial: when the copy from a running parley breaks off,
// is not a database, or is refused, parley backup says so and writes
// nothing where it was told to, not even a temporary file.
func TestBackupNeverPartial(t *testing.T) {
	t.Parallel()
	data := dataDirWith(t, 3)
	held, err := bolt.Open(filepath.Join(data, daemon.DBFile), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := backup.WriteKey(data); err != nil {
		t.Fatal(err)
	}
	var whole bytes.Buffer
	if _, err := held.Backup(context.Background(), &whole); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"cut short", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(whole.Len()))
			_, _ = w.Write(whole.Bytes()[:whole.Len()/2])
		}, "broke off"},
		{"not a database", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "6000")
			_, _ = w.Write(bytes.Repeat([]byte("<html>"), 1000))
		}, "does not check out"},
		{"refused", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"error":"missing or wrong Parley-Backup-Key"}`))
		}, "Parley-Backup-Key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(c.handler)
			defer srv.Close()
			out := t.TempDir()
			file := filepath.Join(out, "b.db")
			code, stdout, stderr := parley(t, []string{"PARLEY_DATA_DIR=" + data}, "backup", file, "--url", srv.URL)
			if code != exitFailed || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "Nothing was written to "+file) {
				t.Errorf("exit %d, want a failure saying %q\n%s%s", code, c.want, stdout, stderr)
			}
			if got := dirNames(t, out); len(got) != 0 {
				t.Errorf("left %q", got)
			}
		})
	}
	t.Run("into a file's path", func(t *testing.T) {
		notDir := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(notDir, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := parley(t, []string{"PARLEY_DATA_DIR=" + data}, "backup", filepath.Join(notDir, "b.db"))
		if code != exitFailed || !strings.Contains(stderr, "cannot write in "+notDir) {
			t.Errorf("exit %d, %s", code, stderr)
		}
	})
	t.Run("into a read-only directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("root writes everywhere")
		}
		ro := t.TempDir()
		if err := os.Chmod(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(ro, 0o700) })
		code, _, stderr := parley(t, []string{"PARLEY_DATA_DIR=" + data}, "backup", filepath.Join(ro, "b.db"))
		if code != exitFailed || !strings.Contains(stderr, "cannot write in "+ro) || len(dirNames(t, ro)) != 0 {
			t.Errorf("exit %d, %s", code, stderr)
		}
	})
}

// TestRestoreRefusesNonDatabases: a file that is not a sound parley
// database is refused with what is wrong with it, and nothing changes.
func TestRestoreRefusesNonDatabases(t *testing.T) {
	t.Parallel()
	data := dataDirWith(t, 2)
	db := filepath.Join(data, daemon.DBFile)
	before := read(t, db)
	good := read(t, filepath.Join(dataDirWith(t, 1), daemon.DBFile))
	files := t.TempDir()
	for name, content := range map[string][]byte{
		"cut.db":    good[:len(good)/2],
		"notes.txt": []byte("my notes\n"),
	} {
		path := filepath.Join(files, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := parley(t, []string{"PARLEY_DATA_DIR=" + data}, "restore", path)
		if code != exitFailed || !strings.Contains(stderr, "the database "+path+" is damaged or not a parley database") || !strings.Contains(stderr, "Nothing was changed") {
			t.Errorf("%s: exit %d, %s", name, code, stderr)
		}
		if !bytes.Equal(read(t, db), before) || !slices.Equal(dirNames(t, data), []string{daemon.DBFile}) {
			t.Errorf("%s: the data directory changed: %q", name, dirNames(t, data))
		}
	}
	if code, _, stderr := parley(t, []string{"PARLEY_DATA_DIR=" + data}, "restore"); code != exitUsage || !strings.Contains(stderr, "parley restore FILE") {
		t.Errorf("restore without a file: exit %d, %s", code, stderr)
	}
}

// TestBackupPostgres: with [store] url, backup and restore print the
// pg_dump and pg_restore commands for the configured database, never its
// password, and say it is left out.
func TestBackupPostgres(t *testing.T) {
	t.Parallel()
	const secret = "hunter2-pg-secret"
	for _, c := range []struct {
		url, shown string
	}{
		{"postgres://parley:" + secret + "@db.example.org:5432/parley?sslmode=require", "'postgres://parley@db.example.org:5432/parley?sslmode=require'"},
		{"postgres://parley@db.example.org/parley?password=" + secret + "&sslmode=disable", "'postgres://parley@db.example.org/parley?sslmode=disable'"},
	} {
		env := []string{"PARLEY_STORE_URL=" + c.url}
		code, stdout, stderr := parley(t, env, "backup")
		want := "pg_dump --format=custom --file=parley.dump " + c.shown
		if code != exitUsage || !strings.Contains(stdout, want) || !strings.Contains(stdout, "The password in [store] url is not shown") {
			t.Errorf("backup: exit %d, want %q\n%s%s", code, want, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("the password was printed:\n%s%s", stdout, stderr)
		}
		code, stdout, stderr = parley(t, env, "restore", "/var/backups/parley it.dump")
		want = "pg_restore --clean --if-exists --no-owner --dbname=" + c.shown + " '/var/backups/parley it.dump'"
		if code != exitUsage || !strings.Contains(stdout, want) || strings.Contains(stdout+stderr, secret) {
			t.Errorf("restore: exit %d, want %q\n%s%s", code, want, stdout, stderr)
		}
	}
	code, stdout, _ := parley(t, []string{"PARLEY_STORE_URL=postgres://parley@db.example.org/parley", "PARLEY_STORE_BACKUP_DIR=/srv/backups"}, "backup")
	if code != exitUsage || !strings.Contains(stdout, "--file=/srv/backups/parley-") || !strings.Contains(stdout, ".dump postgres://parley@db.example.org/parley\n") || strings.Contains(stdout, "password") {
		t.Errorf("backup into backup_dir: exit %d\n%s", code, stdout)
	}
}

// TestDoctorBackupAge: with backup_dir set, doctor fails when there is no
// backup or the newest is a day old, and says how old it is; a clock
// fixed in the test decides.
func TestDoctorBackupAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	data := dataDirWith(t, 1)
	check := func(dir string, mutate ...func(*config.Config)) finding {
		cfg := config.Default()
		cfg.DataDir, cfg.Store.BackupDir = data, dir
		for _, m := range mutate {
			m(&cfg)
		}
		return (&checkup{cfg: cfg, now: func() time.Time { return now }}).checkBackups()
	}
	put := func(dir string, at time.Time) {
		if err := os.WriteFile(filepath.Join(dir, backup.Name(at)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if f := check(dir); f.OK || !strings.Contains(f.Problem, "there is no backup in "+dir) || !strings.Contains(f.Fix, "parley backup") {
		t.Errorf("none: %+v", f)
	}
	if f := check(filepath.Join(dir, "missing")); f.OK || !strings.Contains(f.Problem, "no backup") {
		t.Errorf("no directory yet: %+v", f)
	}
	put(dir, now.Add(50*time.Hour)) // a wrong clock's: not a backup of now
	if f := check(dir); f.OK {
		t.Errorf("only a backup from the future: %+v", f)
	}
	put(dir, now.Add(-72*time.Hour))
	if f := check(dir); f.OK || !strings.Contains(f.Problem, "parley-20261125T120000Z.db, was taken 3 days ago") || !strings.Contains(f.Fix, "daily backup failed") {
		t.Errorf("3 days old: %+v", f)
	}
	put(dir, now.Add(-24*time.Hour))
	if f := check(dir); f.OK || !strings.Contains(f.Problem, "was taken 24 hours ago") {
		t.Errorf("a day old: %+v", f)
	}
	put(dir, now.Add(-5*time.Hour))
	if f := check(dir); !f.OK || !strings.Contains(f.Detail, "parley-20261128T070000Z.db, was taken 5 hours ago; 4 kept, at most 7") {
		t.Errorf("fresh: %+v", f)
	}
	if f := check(t.TempDir(), func(c *config.Config) { c.DataDir = t.TempDir() }); !f.OK || !strings.Contains(f.Detail, "no database yet") {
		t.Errorf("nothing to back up yet: %+v", f)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if f := check(file); f.OK || !strings.Contains(f.Problem, "is not a directory") || !strings.Contains(f.Fix, "PARLEY_STORE_BACKUP_DIR") {
		t.Errorf("a file: %+v", f)
	}
	if f := check(t.TempDir(), func(c *config.Config) { c.Store.URL = "postgres://x@h/db" }); !f.OK || !strings.Contains(f.Detail, "pg_dump") {
		t.Errorf("PostgreSQL: %+v", f)
	}

	// In doctor's list, on the real clock.
	put(dir, time.Now().Add(-time.Hour))
	_, fs := runDoctor(t, "PARLEY_DATA_DIR="+data, "PARLEY_STORE_BACKUP_DIR="+dir)
	wantFinding(t, fs, "backups", true, "was taken")
	_, fs = runDoctor(t, "PARLEY_DATA_DIR="+data, "PARLEY_STORE_BACKUP_DIR="+t.TempDir())
	wantFinding(t, fs, "backups", false, "there is no backup")
	if _, fs = runDoctor(t, "PARLEY_DATA_DIR="+data); len(only(fs, "backups")) != 0 {
		t.Errorf("a backups finding without backup_dir: %+v", only(fs, "backups"))
	}
}
