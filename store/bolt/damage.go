package bolt

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// DamagedFix is what to do about a damaged database file. doctor and the
// start-up error say it after naming the file.
const DamagedFix = "stop parley and restore the file from a backup (parley restore FILE); without one, move it away " +
	"(keep it: the messages in it may still be readable) and parley starts with an empty database"

// DamagedError is a database file found damaged, or not a database at all:
// at Open, or by a transaction that failed on what it read. It wraps
// core.ErrDamaged; Fix says what to do.
type DamagedError struct {
	// Path is the database file.
	Path string
	// Why says what was found ("it is empty", "page 12 is past the end
	// of the file").
	Why string
}

// Error says the problem and, briefly, the fix: it is what a log line
// shows of a request that met the damage.
func (e *DamagedError) Error() string {
	return e.Problem() + " (stop parley and restore it from a backup with parley restore; parley doctor checks the file)"
}

// Problem says which file is damaged and what was found, without the fix.
func (e *DamagedError) Problem() string {
	return fmt.Sprintf("the database %s is damaged or not a parley database: %s", e.Path, e.Why)
}

// Unwrap returns core.ErrDamaged.
func (e *DamagedError) Unwrap() error { return core.ErrDamaged }

// Fix returns DamagedFix.
func (e *DamagedError) Fix() string { return DamagedFix }

// The layout of a bbolt file's meta page (go.etcd.io/bbolt/internal/common),
// in the byte order of the machine that wrote it: a 16-byte page header
// (id, flags, count, overflow), then magic, version, page size, flags, the
// root bucket (page id, sequence), the freelist's page id, the high-water
// page id, the transaction id and an FNV-64a checksum of what precedes it.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaSize         = 64
	metaChecksumAt   = 56
	flagBranch       = 0x01
	flagLeaf         = 0x02
	flagFreelist     = 0x10
	noFreelist       = 0xffffffffffffffff
	smallestPageSize = 1024
	largestPageSize  = 1024 << 14
)

type fileMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// readMeta decodes and verifies the meta page at off; ok is false when it
// is not a valid one.
func readMeta(f io.ReaderAt, off int64) (m fileMeta, ok bool) {
	var b [pageHeaderSize + metaSize]byte
	if n, _ := f.ReadAt(b[:], off); n < len(b) {
		return m, false
	}
	e := binary.NativeEndian
	meta := b[pageHeaderSize:]
	if e.Uint32(meta[0:]) != boltMagic || e.Uint32(meta[4:]) != boltVersion {
		return m, false
	}
	h := fnv.New64a()
	h.Write(meta[:metaChecksumAt])
	if h.Sum64() != e.Uint64(meta[metaChecksumAt:]) {
		return m, false
	}
	m = fileMeta{pageSize: e.Uint32(meta[8:]), root: e.Uint64(meta[16:]), freelist: e.Uint64(meta[32:]),
		pgid: e.Uint64(meta[40:]), txid: e.Uint64(meta[48:])}
	return m, m.pageSize >= smallestPageSize && m.pageSize <= largestPageSize && m.pageSize&(m.pageSize-1) == 0
}

// checkFile looks at an existing database file before bbolt maps it, and
// returns a *DamagedError for what would make bbolt fail obscurely, panic
// or fault: no valid meta page (empty, cut short, overwritten, another
// program's file), or a meta page that refers to pages past the end of the
// file (cut short after a crash of the disk or a bad copy; bbolt would read
// them through its memory map and the process would die of SIGBUS), or whose
// freelist or root page is not one. It reads three pages, whatever the
// file's size: checking every page (bbolt's Tx.Check) is parley doctor's
// job. A file that does not exist is fine (Open creates it).
//
// The pages are read under a shared lock, taken within timeout (zero:
// waited for, as bbolt does): a running parley holds the exclusive lock
// and rewrites those pages, and read beside it they may be half written —
// a live database reported damaged. A file a writer holds past timeout is
// ErrInUse, which is what bbolt's own open would find.
func checkFile(path string, timeout time.Duration) error {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return nil // bbolt's own open reports it (permissions)
	}
	defer f.Close() // and so lets the shared lock go
	deadline := time.Now().Add(timeout)
	for {
		err := shareFile(f)
		if err == nil {
			break
		}
		if !errors.Is(err, errLocked) {
			return fmt.Errorf("bolt: open %s: %w", path, err)
		}
		if timeout > 0 && time.Now().After(deadline) {
			return fmt.Errorf("bolt: open %s: %w", path, ErrInUse)
		}
		time.Sleep(lockPoll)
	}
	info, err := f.Stat()
	if err != nil {
		return nil
	}
	size := info.Size()
	damaged := func(format string, args ...any) error {
		return &DamagedError{Path: path, Why: fmt.Sprintf(format, args...)}
	}
	if size == 0 {
		return damaged("it is empty (0 bytes)")
	}
	// The page size is in the meta pages; like bbolt, find the second one
	// at every possible page size when the first is unreadable.
	m0, ok0 := readMeta(f, 0)
	var m1 fileMeta
	var ok1 bool
	if ok0 {
		m1, ok1 = readMeta(f, int64(m0.pageSize))
	} else {
		for ps := int64(smallestPageSize); ps <= largestPageSize && ps < size; ps <<= 1 {
			if m1, ok1 = readMeta(f, ps); ok1 && int64(m1.pageSize) == ps {
				break
			}
			ok1 = false
		}
	}
	var m fileMeta
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		m = m1
	case ok0:
		m = m0
	default:
		return damaged("no valid bbolt header in its first pages (%d bytes): it was cut short, overwritten, or is another program's file", size)
	}
	ps := int64(m.pageSize)
	if pages := size / ps; uint64(pages) < m.pgid {
		return damaged("it is %d bytes, %d pages, but its header counts %d pages: it was cut short", size, pages, m.pgid)
	}
	if m.root < 2 || m.root >= m.pgid {
		return damaged("its root page %d is outside the file's %d pages", m.root, m.pgid)
	}
	if err := checkPage(f, ps, m.root, m.pgid, flagBranch|flagLeaf); err != "" {
		return damaged("its root page %d %s", m.root, err)
	}
	if m.freelist != noFreelist {
		if m.freelist < 2 || m.freelist >= m.pgid {
			return damaged("its freelist page %d is outside the file's %d pages", m.freelist, m.pgid)
		}
		if err := checkPage(f, ps, m.freelist, m.pgid, flagFreelist); err != "" {
			return damaged("its freelist page %d %s", m.freelist, err)
		}
		// bbolt allocates what the count says before reading the ids:
		// a wrong count would be a fatal out-of-memory, not a panic.
		if n, fits := freelistCount(f, ps, m.freelist); n > fits {
			return damaged("its freelist page %d counts %d free pages, more than it can hold (%d)", m.freelist, n, fits)
		}
	}
	return nil
}

// freelistCount returns how many ids the freelist page id says it holds,
// and how many fit in it and its overflow pages. The count is the header's,
// or, at 0xFFFF, the first id's slot.
func freelistCount(f io.ReaderAt, pageSize int64, id uint64) (n, fits uint64) {
	var b [pageHeaderSize + 8]byte
	if n, _ := f.ReadAt(b[:], int64(id)*pageSize); n < len(b) {
		return 1, 0
	}
	e := binary.NativeEndian
	n = uint64(e.Uint16(b[10:]))
	slots := (uint64(e.Uint32(b[12:]))+1)*uint64(pageSize)/8 - pageHeaderSize/8
	if n == 0xFFFF {
		n = e.Uint64(b[pageHeaderSize:])
		slots-- // the count's own slot
	}
	return n, slots
}

// checkPage reads the header of page id and says what is wrong with it: not
// of one of the flags, another page's id, or overflowing past pgid.
func checkPage(f io.ReaderAt, pageSize int64, id, pgid uint64, flags uint16) string {
	var b [pageHeaderSize]byte
	if n, _ := f.ReadAt(b[:], int64(id)*pageSize); n < len(b) {
		return "cannot be read"
	}
	e := binary.NativeEndian
	switch {
	case e.Uint64(b[0:]) != id:
		return fmt.Sprintf("holds page %d", e.Uint64(b[0:]))
	case e.Uint16(b[8:])&^flags != 0 || e.Uint16(b[8:]) == 0:
		return fmt.Sprintf("is of the wrong kind (flags %#x)", e.Uint16(b[8:]))
	case id+uint64(e.Uint32(b[12:])) >= pgid:
		return fmt.Sprintf("overflows past the file's %d pages", pgid)
	}
	return ""
}

// guard runs fn, which uses bbolt, and turns a panic that bbolt raised, or a
// memory fault on its mapped file, into a *DamagedError naming the file:
// bbolt panics ("invalid freelist page", "unreachable", index out of range)
// when the pages it reads are not what it wrote, and reading a page past
// the end of a file cut short while open faults. A panic in parley's own
// code is not damage and is raised again. For the duration of fn the
// goroutine turns faults into panics (debug.SetPanicOnFault), so that they
// can be recovered at all.
func guard(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		if d := damageOf(path, p); d != nil {
			err = d
			return
		}
		panic(p)
	}()
	return fn()
}

// damageOf returns the damage a recovered panic p means, or nil when it is
// not bbolt's. It must be called by the deferred function that recovered
// p: it looks at the stack the panic is unwinding.
func damageOf(path string, p any) *DamagedError {
	// A fault on an address past the first page is a read of the
	// mapped file that the system refused: the file is shorter than bbolt
	// believes. A nil dereference is a bug, unless bbolt made it.
	if f, ok := p.(interface{ Addr() uintptr }); ok && f.Addr() >= 4096 {
		return &DamagedError{Path: path, Why: fmt.Sprintf("reading it failed (%v, address %#x): it was cut short or changed while open", p, f.Addr())}
	}
	if !panickedInBbolt() {
		return nil
	}
	return &DamagedError{Path: path, Why: fmt.Sprintf("the storage library failed on what it read: %v", p)}
}

// panickedInBbolt reports whether the code that raised the panic being
// recovered is bbolt's: the innermost function below runtime.gopanic that
// is not the runtime's or the standard library's. Only the innermost one
// counts, since parley's callbacks run inside bbolt's View and Update and
// their bugs are not damage.
func panickedInBbolt() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(1, pcs)])
	unwinding := false
	for {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			unwinding = true
		case unwinding && !isStd(f.Function):
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt.") || strings.HasPrefix(f.Function, "go.etcd.io/bbolt/")
		}
		if !more {
			return false
		}
	}
}

// isStd reports whether the function name is of the runtime or the standard
// library, whose import paths have no dot in their first element (a name
// without a slash is of a one-element path: "bytes.Equal", or main).
func isStd(function string) bool {
	if first, _, ok := strings.Cut(function, "/"); ok {
		return !strings.Contains(first, ".")
	}
	return !strings.HasPrefix(function, "main.")
}

// Check reads every page of the file and checks that the pages form
// consistent trees and that every page is either used or free (bbolt's
// Tx.Check), and returns a *DamagedError naming the first problems when
// they do not. It reads the whole file, which Open does not (it checks the
// header pages only): on a file of 100,000 sessions (96 MiB) in the page
// cache it takes 30 ms (BenchmarkCheck), from a cold disk as long as reading
// the file, and it leaves the whole file resident in the process's memory
// map. parley doctor runs it; serve, whose start-up and memory matter,
// does not, and meets deeper damage as an error of the request that reads
// it.
//
// bbolt checks in a goroutine of its own, which recovers bbolt's panics but
// not memory faults: Check relies on Open having found every page the header
// counts within the file, and on the lock that keeps other processes from
// changing it.
func (s *Store) Check(ctx context.Context) error {
	var why string
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		why = checkTx(tx)
		return nil
	})
	if err != nil {
		return err
	}
	if why == "" {
		return nil
	}
	return &DamagedError{Path: s.path, Why: why}
}

// checkTx runs bbolt's Tx.Check on tx and says what it found, the first
// few problems; "" when there are none.
func checkTx(tx *bbolt.Tx) string {
	const shown = 3
	var problems []string
	n := 0
	// Drained to the end: the checker reads the transaction's pages until
	// it closes the channel.
	for err := range tx.Check() {
		if n++; n <= shown {
			problems = append(problems, err.Error())
		}
	}
	if n == 0 {
		return ""
	}
	why := fmt.Sprintf("a check of every page found %d problems: %s", n, strings.Join(problems, "; "))
	if n > shown {
		why += "; …"
	}
	return why
}
