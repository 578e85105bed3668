package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// filledDB writes a closed database with sessions and messages enough for
// many pages, and returns its path and size.
func filledDB(t *testing.T) (string, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		sess := createSession(t, s, core.Session{Title: fmt.Sprint("session ", i)})
		appendText(t, s, sess.ID, strings.Repeat(fmt.Sprint("message of session ", i, ". "), 20))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, info.Size()
}

// pngHeader is the start of a real PNG file (a 1×1 image).
var pngHeader = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")

// TestOpenRefusesDamagedFiles: whatever is in the file, Open returns a
// *DamagedError that names it and says the fix, and never panics or faults.
func TestOpenRefusesDamagedFiles(t *testing.T) {
	real, size := filledDB(t)
	whole, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rnd.Uint32())
	}
	tests := []struct {
		name    string
		content []byte
		why     string
	}{
		{"empty", nil, "empty"},
		{"one byte", whole[:1], "no valid bbolt header"},
		{"half a page", whole[:2048], "cut short"},
		{"one page", whole[:4096], "cut short"},
		{"two pages", whole[:8192], "cut short"},
		{"cut in the middle", whole[:size/2], "cut short"},
		{"cut one page short of its header's count", shortOfHighWater(t, whole), "cut short"},
		{"random bytes", garbage, "no valid bbolt header"},
		{"a PNG image", append(pngHeader, garbage...), "no valid bbolt header"},
		{"a text file", []byte(strings.Repeat("[http]\nlisten = \"127.0.0.1:8766\"\n", 200)), "no valid bbolt header"},
		{"first meta page overwritten, second cut", append(garbage[:4096:4096], whole[4096:size/2]...), "cut short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "parley.db")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{NoSync: true})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			checkDamaged(t, err, path, tt.why)
			// The file is left as it was, and not locked: the next
			// Open says the same.
			if got, _ := os.ReadFile(path); string(got) != string(tt.content) {
				t.Errorf("the file was changed: %d bytes, was %d", len(got), len(tt.content))
			}
			if _, err := Open(path, Options{NoSync: true}); !errors.Is(err, core.ErrDamaged) {
				t.Errorf("second Open: %v", err)
			}
		})
	}
}

// TestOpenRefusesDamagedPages: pages that the header points at, or that
// bbolt reads while opening, hold the wrong thing.
func TestOpenRefusesDamagedPages(t *testing.T) {
	real, _ := filledDB(t)
	whole, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	m := currentMeta(t, whole)
	ps := int(m.pageSize)
	tests := []struct {
		name   string
		damage func(b []byte)
		why    string
	}{
		{"freelist page zeroed", func(b []byte) { clear(b[int(m.freelist)*ps : int(m.freelist+1)*ps]) }, "freelist page"},
		{"root page zeroed", func(b []byte) { clear(b[int(m.root)*ps : int(m.root+1)*ps]) }, "root page"},
		// bbolt reads the freelist's count and ids as they are: a count
		// past the page made it panic ("invalid freelist page" and
		// friends) or fault.
		{"freelist count wrong", func(b []byte) {
			binary.NativeEndian.PutUint16(b[int(m.freelist)*ps+10:], 0xffff)
			binary.NativeEndian.PutUint64(b[int(m.freelist)*ps+16:], 1<<40)
		}, "more than it can hold"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := append([]byte(nil), whole...)
			tt.damage(b)
			path := filepath.Join(t.TempDir(), "parley.db")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{NoSync: true})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			checkDamaged(t, err, path, tt.why)
			if _, err := Open(path, Options{NoSync: true, LockTimeout: 100e6}); !errors.Is(err, core.ErrDamaged) {
				t.Errorf("second Open (the first must not keep the file locked): %v", err)
			}
		})
	}
}

// currentMeta is the meta page bbolt uses: the valid one with the higher
// transaction id.
func currentMeta(t *testing.T, file []byte) fileMeta {
	t.Helper()
	m, ok := readMeta(bytesReader(file), 0)
	if !ok {
		t.Fatal("the first meta page is not valid")
	}
	if m1, ok1 := readMeta(bytesReader(file), int64(m.pageSize)); ok1 && m1.txid > m.txid {
		m = m1
	}
	return m
}

// shortOfHighWater is the file cut one page short of the pages its header
// counts.
func shortOfHighWater(t *testing.T, file []byte) []byte {
	m := currentMeta(t, file)
	return file[:int(m.pgid-1)*int(m.pageSize)]
}

type bytesReader []byte

func (b bytesReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, fmt.Errorf("EOF")
	}
	return copy(p, b[off:]), nil
}

func checkDamaged(t *testing.T, err error, path, why string) {
	t.Helper()
	var d *DamagedError
	if !errors.As(err, &d) || !errors.Is(err, core.ErrDamaged) {
		t.Fatalf("error %v (%T) is not a *DamagedError wrapping core.ErrDamaged", err, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name the file", err)
	}
	if !strings.Contains(err.Error(), why) {
		t.Errorf("error %q does not say %q", err, why)
	}
	if !strings.Contains(d.Fix(), "restore the file from a backup") {
		t.Errorf("fix %q", d.Fix())
	}
}

// TestDamageWhileOpenIsAnError: a file cut short under a running store
// (another program, a failing disk) makes reads and writes fail with a
// *DamagedError; without the guard bbolt faults on the missing pages
// (SIGBUS) and the process dies.
func TestDamageWhileOpenIsAnError(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s := openAt(t, path, Options{NoSync: true})
	var sessions []core.SessionID
	for i := range 300 {
		sess := createSession(t, s, core.Session{Title: fmt.Sprint("session ", i)})
		appendText(t, s, sess.ID, strings.Repeat("words ", 100))
		sessions = append(sessions, sess.ID)
	}
	if err := os.Truncate(path, 2*4096); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.SessionsPage(ctx, core.SessionQuery{Limit: 1000})
	checkDamaged(t, err, path, "cut short or changed while open")
	_, err = s.Inbox(ctx, "", "", 0)
	checkDamaged(t, err, path, "")
	_, err = s.Append(ctx, core.Append{Message: core.Message{Session: sessions[0], Role: core.RoleUser,
		Mime: core.MimeMarkdown, Content: "still there?"}})
	if !errors.Is(err, core.ErrDamaged) {
		t.Errorf("Append: %v, want core.ErrDamaged", err)
	}
	// The committer survived: writes are still answered.
	_, _, err = s.CreateSession(ctx, core.Session{Title: "after"})
	if !errors.Is(err, core.ErrDamaged) {
		t.Errorf("CreateSession: %v, want core.ErrDamaged", err)
	}
}

// TestParleysOwnPanicsAreNotDamage: a panic in parley's code inside a
// transaction is a bug, raised again, not reported as a damaged file.
func TestParleysOwnPanicsAreNotDamage(t *testing.T) {
	s, _ := openTemp(t, Options{})
	defer func() {
		if p := recover(); p != "a bug" {
			t.Errorf("recovered %v, want the bug's panic", p)
		}
	}()
	_ = s.view(context.Background(), func(*bbolt.Tx) error { panic("a bug") })
	t.Error("view returned")
}

// TestCheckFindsDamageOpenDoesNotLookFor: pages deep in the file zeroed.
// Open checks the header pages only and succeeds; a read that needs those
// pages fails with a *DamagedError, and Check, which reads every page,
// finds them. A sound file passes Check.
func TestCheckFindsDamageOpenDoesNotLookFor(t *testing.T) {
	ctx := context.Background()
	real, _ := filledDB(t)
	whole, err := os.ReadFile(real)
	if err != nil {
		t.Fatal(err)
	}
	s := openAt(t, real, Options{NoSync: true})
	if err := s.Check(ctx); err != nil {
		t.Fatalf("Check of a sound file: %v", err)
	}
	s.Close()

	m := currentMeta(t, whole)
	ps := uint64(m.pageSize)
	for id := uint64(2); id < m.pgid; id++ {
		if id != m.root && id != m.freelist {
			clear(whole[id*ps : (id+1)*ps])
		}
	}
	path := filepath.Join(t.TempDir(), "parley.db")
	if err := os.WriteFile(path, whole, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatalf("Open: %v (it checks the header pages only)", err)
	}
	defer s.Close()
	_, _, err = s.SessionsPage(ctx, core.SessionQuery{Limit: 10})
	checkDamaged(t, err, path, "the storage library failed on what it read")
	err = s.Check(ctx)
	checkDamaged(t, err, path, "a check of every page found")
}

// BenchmarkCheck measures Check on a file of PARLEY_CHECK_SESSIONS
// sessions (default 10,000) with one message each.
//
//	PARLEY_CHECK_SESSIONS=100000 go test ./store/bolt -run '^$' -bench BenchmarkCheck -benchtime 3x
func BenchmarkCheck(b *testing.B) {
	n := 10_000
	if v := os.Getenv("PARLEY_CHECK_SESSIONS"); v != "" {
		fmt.Sscan(v, &n)
	}
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "parley.db")
	s := openAt(b, path, Options{NoSync: true})
	for i := range n {
		sess := createSession(b, s, core.Session{Title: fmt.Sprint("session ", i)})
		appendText(b, s, sess.ID, fmt.Sprintf("Session %d: the build fails on main since this morning, can you look?", i))
	}
	for b.Loop() {
		if err := s.Check(ctx); err != nil {
			b.Fatal(err)
		}
	}
	info, _ := os.Stat(path)
	b.ReportMetric(float64(info.Size())/(1<<20), "file-MiB")
}
