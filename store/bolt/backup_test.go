package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// messageIDs returns every inbox message id of s.
func messageIDs(tb testing.TB, s *Store) map[core.MessageID]bool {
	tb.Helper()
	out := map[core.MessageID]bool{}
	err := s.Export(context.Background(), store.KindMessages, func(r store.Record) error {
		out[r.Message.ID] = true
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestBackupWhileWriting: a backup taken while writers append holds every
// message whose append returned before the backup began, opens as a sound
// parley database, and the writers were never refused.
func TestBackupWhileWriting(t *testing.T) {
	s, _ := openTemp(t, Options{})
	sess := createSession(t, s, core.Session{Title: "load"})
	var (
		mu    sync.Mutex
		acked []core.MessageID
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				res, err := s.Append(context.Background(), core.Append{Message: core.Message{
					Session: sess.ID, Role: core.RoleUser, Mime: core.MimeMarkdown, Content: fmt.Sprintf("writer %d message %d", w, i)}})
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				acked = append(acked, res.Message.ID)
				mu.Unlock()
			}
		})
	}
	// Wait for the writers to have written something, on the condition.
	deadline := time.After(30 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 500 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("only %d appends in 30 s", n)
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(time.Millisecond):
		}
	}
	mu.Lock()
	before := append([]core.MessageID(nil), acked...)
	mu.Unlock()
	var buf bytes.Buffer
	n, err := s.Backup(context.Background(), &buf)
	stop()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	if n != int64(buf.Len()) {
		t.Errorf("Backup said %d bytes, wrote %d", n, buf.Len())
	}
	copyPath := filepath.Join(t.TempDir(), "backup.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := Verify(context.Background(), copyPath)
	if err != nil {
		t.Fatalf("Verify of the backup: %v", err)
	}
	if sum.Schema != SchemaVersion || sum.Sessions != 1 || sum.Messages < len(before) || sum.Size != n {
		t.Errorf("summary %+v, want schema %d, 1 session, at least %d messages, %d bytes", sum, SchemaVersion, len(before), n)
	}
	restored := openAt(t, copyPath, Options{NoSync: true})
	if err := restored.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	have := messageIDs(t, restored)
	for _, id := range before {
		if !have[id] {
			t.Fatalf("message %s, acknowledged before the backup began, is not in it", id)
		}
	}
	t.Logf("%d messages acknowledged before the backup, %d in it, %d written in all", len(before), len(have), len(acked))
}

// TestBackupFileOfAHeldFile: a file a running store holds cannot be copied
// from outside (ErrInUse, within the timeout); once it is closed it can,
// and the copy is sound.
func TestBackupFileOfAHeldFile(t *testing.T) {
	s, path := openTemp(t, Options{})
	sess := createSession(t, s, core.Session{Title: "held"})
	m := appendText(t, s, sess.ID, "kept")
	var buf bytes.Buffer
	if _, err := BackupFile(context.Background(), path, &buf, 100*time.Millisecond); !errors.Is(err, ErrInUse) {
		t.Fatalf("BackupFile of a held file: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if _, err := BackupFile(context.Background(), path, &buf, time.Second); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if err := os.WriteFile(copyPath, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(context.Background(), copyPath); err != nil || sum.Messages != 1 {
		t.Fatalf("Verify: %+v, %v", sum, err)
	}
	if !messageIDs(t, openAt(t, copyPath, Options{NoSync: true}))[m.ID] {
		t.Error("the copy lacks the message")
	}
	if _, err := BackupFile(context.Background(), filepath.Join(t.TempDir(), "none.db"), &buf, time.Second); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("BackupFile of no file: %v, want fs.ErrNotExist", err)
	}
}

// TestVerifyRefuses: Verify tells a damaged file, another program's bbolt
// file, a newer parley's and a directory from a parley database, and
// changes none of them.
func TestVerifyRefuses(t *testing.T) {
	real, size := filledDB(t)
	whole, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign.db")
	db, err := bbolt.Open(foreign, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	newer := filepath.Join(dir, "newer.db")
	if err := os.WriteFile(newer, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err = bbolt.Open(newer, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchema, []byte(strconv.Itoa(SchemaVersion+1)))
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	// A page in the middle overwritten: the header pages are sound, the
	// whole-file check is what finds it.
	middle := bytes.Clone(whole)
	clear(middle[size/2 : size/2+4096])
	files := map[string][]byte{
		"empty":     {},
		"text":      []byte("not a database at all\n"),
		"truncated": whole[:size/2],
		"middle":    middle,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"empty", "text", "truncated", "middle", "foreign.db"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			before, _ := os.ReadFile(path)
			_, err := Verify(context.Background(), path)
			var d *DamagedError
			if !errors.As(err, &d) || d.Path != path || !errors.Is(err, core.ErrDamaged) {
				t.Fatalf("Verify: %v, want a *DamagedError naming %s", err, path)
			}
			after, _ := os.ReadFile(path)
			if !bytes.Equal(before, after) {
				t.Error("Verify changed the file")
			}
			t.Log(d.Why)
		})
	}
	if _, err := Verify(context.Background(), newer); !errors.Is(err, core.ErrSchemaTooNew) {
		t.Errorf("Verify of a newer file: %v, want core.ErrSchemaTooNew", err)
	}
	var d *DamagedError
	if _, err := Verify(context.Background(), dir); !errors.As(err, &d) {
		t.Errorf("Verify of a directory: %v, want a *DamagedError", err)
	}
	if sum, err := Verify(context.Background(), real); err != nil || sum.Sessions != 300 || sum.Messages != 300 {
		t.Errorf("Verify of the sound file: %+v, %v", sum, err)
	}
}

// TestLock: the lock is the one a running store holds: Lock waits for it
// and says ErrInUse, and a store cannot open a file Lock holds.
func TestLock(t *testing.T) {
	s, path := openTemp(t, Options{})
	if _, err := Lock(path, 100*time.Millisecond); !errors.Is(err, ErrInUse) {
		t.Fatalf("Lock of a held file: %v, want ErrInUse", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	unlock, err := Lock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{LockTimeout: 100 * time.Millisecond}); !errors.Is(err, ErrInUse) {
		t.Fatalf("Open of a locked file: %v, want ErrInUse", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	openAt(t, path, Options{NoSync: true})
	if _, err := Lock(filepath.Join(t.TempDir(), "none.db"), time.Second); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Lock of no file: %v, want fs.ErrNotExist", err)
	}
}

// TestOpenWhileReplaced: a store opening the data directory's file while
// parley restore holds its lock and renames another file into its place
// opens the new file, not the old one it was waiting for.
func TestOpenWhileReplaced(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("waits for the open through /proc/self/fd")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "parley.db")
	old := openAt(t, path, Options{NoSync: true})
	createSession(t, old, core.Session{Title: "old"})
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	next := filepath.Join(dir, "next.db")
	nw := openAt(t, next, Options{NoSync: true})
	createSession(t, nw, core.Session{Title: "new"})
	if err := nw.Close(); err != nil {
		t.Fatal(err)
	}
	unlock, err := Lock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	type opened struct {
		s   *Store
		err error
	}
	done := make(chan opened, 1)
	go func() {
		s, err := Open(path, Options{NoSync: true, LockTimeout: 30 * time.Second})
		done <- opened{s, err}
	}()
	// Until the opening store waits for the lock on the old file: two
	// descriptors of it, Lock's and bbolt's.
	waitFor(t, "the store to open the old file", func() bool { return openCount(path) >= 2 })
	if err := os.Rename(next, path); err != nil {
		t.Fatal(err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	var o opened
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Open did not return")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	defer o.s.Close()
	list, err := o.s.Sessions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].Title != "new" {
		t.Fatalf("the store opened %+v, want the new file's session", list)
	}
}

// openCount counts this process's descriptors open on path (Linux).
func openCount(path string) int {
	entries, _ := os.ReadDir("/proc/self/fd")
	n := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && target == path {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds, failing after 30 s.
func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.After(30 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			tb.Fatalf("timed out waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestBackupIsASnapshot: messages committed while the copy is being
// written (between its first bytes and its last) are not in it, and it is
// sound: it is the database as of one moment, not a mix of the file's
// bytes before and after those commits.
func TestBackupIsASnapshot(t *testing.T) {
	// A memory map large enough that no commit during the copy must grow
	// it: that commit would wait for the copy's read transaction to end.
	s, _ := openTemp(t, Options{mmapSize: 64 << 20})
	sess := createSession(t, s, core.Session{Title: "snapshot"})
	var before []core.MessageID
	for i := range 200 {
		before = append(before, appendText(t, s, sess.ID, fmt.Sprint("before ", i)).ID)
	}
	var during []core.MessageID
	var buf bytes.Buffer
	w := writerFunc(func(p []byte) (int, error) {
		if during == nil {
			// Commits meanwhile: each returns once committed, so all are
			// in the file before the copy goes on.
			for i := range 50 {
				res, err := s.Append(context.Background(), core.Append{Message: core.Message{Session: sess.ID, Role: core.RoleUser,
					Mime: core.MimeMarkdown, Content: fmt.Sprint("during ", i)}})
				if err != nil {
					return 0, fmt.Errorf("append during the copy: %w", err)
				}
				during = append(during, res.Message.ID)
			}
		}
		return buf.Write(p)
	})
	if _, err := s.Backup(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "snapshot.db")
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), path); err != nil {
		t.Fatal(err)
	}
	have := messageIDs(t, openAt(t, path, Options{NoSync: true}))
	for _, id := range before {
		if !have[id] {
			t.Fatalf("message %s, committed before the copy, is not in it", id)
		}
	}
	for _, id := range during {
		if have[id] {
			t.Fatalf("message %s, committed while the copy was written, is in it", id)
		}
	}
	if len(have) != len(before) {
		t.Errorf("%d messages in the copy, want %d", len(have), len(before))
	}
	if all := messageIDs(t, s); len(all) != len(before)+len(during) {
		t.Errorf("the store holds %d messages, want %d", len(all), len(before)+len(during))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// BenchmarkBackup measures a backup of a file of PARLEY_CHECK_SESSIONS
// sessions (default 10,000) with one message each, into a file in the same
// directory (as the daemon spools it), and Verify of the copy: the time a
// commit that must grow the memory map may wait, and the time a backup
// takes in all.
//
//	PARLEY_CHECK_SESSIONS=100000 go test ./store/bolt -run '^$' -bench BenchmarkBackup -benchtime 3x
func BenchmarkBackup(b *testing.B) {
	n := 10_000
	if v := os.Getenv("PARLEY_CHECK_SESSIONS"); v != "" {
		fmt.Sscan(v, &n)
	}
	ctx := context.Background()
	dir := b.TempDir()
	s := openAt(b, filepath.Join(dir, "parley.db"), Options{NoSync: true})
	for i := range n {
		sess := createSession(b, s, core.Session{Title: fmt.Sprint("session ", i)})
		appendText(b, s, sess.ID, fmt.Sprintf("Session %d: the build fails on main since this morning, can you look?", i))
	}
	out := filepath.Join(dir, "copy.db")
	var copyTime, verifyTime time.Duration
	var size int64
	for b.Loop() {
		f, err := os.Create(out)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if size, err = s.Backup(ctx, f); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		copyTime += time.Since(start)
		start = time.Now()
		if _, err := Verify(ctx, out); err != nil {
			b.Fatal(err)
		}
		verifyTime += time.Since(start)
	}
	b.ReportMetric(float64(size)/(1<<20), "file-MiB")
	b.ReportMetric(float64(copyTime.Milliseconds())/float64(b.N), "copy-ms/op")
	b.ReportMetric(float64(verifyTime.Milliseconds())/float64(b.N), "verify-ms/op")
}
