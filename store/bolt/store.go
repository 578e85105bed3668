package bolt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bbolt "go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// SchemaVersion is the layout version this code writes. Open refuses a file
// with a higher version rather than misreading it, and upgrades an older one
// in place: version 2 added ledger_by_session, built from the ledger when a
// version 1 file is opened (an older parley then refuses the file rather
// than leave the index behind its writes).
const SchemaVersion = 2

// Defaults for Options.
const (
	DefaultMaxEvents   = 10000
	DefaultLockTimeout = time.Second
)

// ErrClosed is returned by writes to a Store after Close.
var ErrClosed = errors.New("bolt: store is closed")

// ErrInUse is returned by Open when another process holds the database
// file's lock for longer than Options.LockTimeout: another parley runs on
// the same data directory.
var ErrInUse = errors.New("the database is in use by another process")

var (
	bucketMeta        = []byte("meta")
	bucketSessions    = []byte("sessions")
	bucketPlaces      = []byte("places")
	bucketInbox       = []byte("inbox")
	bucketBySess      = []byte("inbox_by_session")
	bucketRecent      = []byte("inbox_recent")
	bucketDedup       = []byte("dedup")
	bucketEvents      = []byte("events")
	bucketLedger      = []byte("ledger")
	bucketLedgerBySes = []byte("ledger_by_session")
	bucketCursors     = []byte("cursors")
	bucketJournal     = []byte("journal")
	bucketJournalDone = []byte("journal_done")

	allBuckets = [][]byte{bucketMeta, bucketSessions, bucketPlaces, bucketInbox,
		bucketBySess, bucketRecent, bucketDedup, bucketEvents, bucketLedger, bucketLedgerBySes, bucketCursors,
		bucketJournal, bucketJournalDone, bucketPairing, bucketAdmitted}

	keySchema = []byte("schema")
	keyLastID = []byte("last_id")
)

// Options tune a Store. The zero value is a durable store with the defaults.
type Options struct {
	// MaxEvents bounds the event log: at least this many of the newest
	// events are kept. Zero means DefaultMaxEvents.
	MaxEvents int
	// NoSync skips fsync on commit. It is for tests only: a crash may then
	// lose acknowledged writes, which breaks parley's durable-first rule.
	NoSync bool
	// Now is the clock for message and event times and message ids. It is
	// called concurrently. Nil means time.Now.
	Now func() time.Time
	// LockTimeout is how long Open waits for another process to release
	// the file, so that a second daemon on the same data directory fails
	// instead of hanging. Zero means DefaultLockTimeout.
	LockTimeout time.Duration
	// Instance is the holder of the leases this store grants; empty means
	// core.NewInstanceID().
	Instance core.InstanceID

	// mmapSize is bbolt's InitialMmapSize, for tests that commit while a
	// read transaction is open and must not wait for a remap.
	mmapSize int
}

// Store is core.Store on a bbolt file. It is safe for concurrent use. See the
// package documentation for the layout.
type Store struct {
	db        *bbolt.DB
	path      string   // for errors
	file      *os.File // bbolt's, closed by Close when broken
	now       func() time.Time
	ids       core.SessionIDs // for CreateSession without an id, ordered by now
	maxEvents uint64
	slack     uint64 // how far the event log may grow past maxEvents before a trim
	foldAt    uint64 // how many entries inbox_recent collects before a fold
	cache     sessionCache
	// broken is set when a write transaction found the file damaged; all
	// later writes fail with it (see guardWrite).
	broken atomic.Pointer[DamagedError]

	// mu is held shared while handing a write to the committer and
	// exclusively by Close, so that no write is sent on a closed channel.
	mu     sync.RWMutex
	closed bool
	reqs   chan *writeReq
	done   chan struct{} // closed when the committer has exited

	closeOnce sync.Once
	closeErr  error

	instance core.InstanceID
	leaseMu  sync.Mutex
	leases   map[string]bool // name → held, for Leases
}

var _ store.Store = (*Store)(nil)

// Open opens or creates the store at path. It fails with an error wrapping
// core.ErrSchemaTooNew when the file was written by a newer parley, and
// leaves such a file untouched; with a *DamagedError (wrapping
// core.ErrDamaged) when the file is damaged or not a database: empty, cut
// short, overwritten or another program's file, found by a look at its
// header pages before bbolt maps it (checkFile), or by bbolt failing on it.
func Open(path string, opts Options) (*Store, error) {
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.LockTimeout <= 0 {
		opts.LockTimeout = DefaultLockTimeout
	}
	db, file, err := openDB(path, bbolt.Options{
		Timeout: opts.LockTimeout,
		NoSync:  opts.NoSync,
		// The map freelist keeps commits cheap once the file has many
		// free pages, and the inbox only grows.
		FreelistType:    bbolt.FreelistMapType,
		InitialMmapSize: opts.mmapSize,
	})
	if err != nil {
		return nil, err
	}
	var damaged *DamagedError
	if err := guard(path, func() error { return db.Update(initSchema) }); err != nil {
		_ = guard(path, db.Close)
		if errors.As(err, &damaged) {
			return nil, err
		}
		return nil, fmt.Errorf("bolt: open %s: %w", path, err)
	}
	maxEvents := uint64(opts.MaxEvents)
	s := &Store{
		db:        db,
		path:      path,
		file:      file,
		now:       opts.Now,
		maxEvents: maxEvents,
		slack:     maxEvents/8 + 1,
		foldAt:    defaultFoldAt,
		reqs:      make(chan *writeReq, maxGroup),
		done:      make(chan struct{}),
		instance:  opts.Instance,
	}
	if s.instance == "" {
		s.instance = core.NewInstanceID()
	}
	go s.commitLoop()
	return s, nil
}

// openDB opens the bbolt file at path with o, after checkFile looked at its
// header pages, taking its lock (exclusive, or shared with o.ReadOnly)
// within o.Timeout: ErrInUse when another process holds it longer, a
// *DamagedError when bbolt fails on what it reads. It returns bbolt's own
// handle of the file too, which only a panicking bbolt leaves open.
//
// The lock is taken on the file the path named when it was opened. When
// the path names another file once the lock is held (parley restore
// renamed a restored file into place while this process waited for the
// old one's lock), the old one is let go and the path opened again, so
// that a daemon never runs on a database that is no longer the data
// directory's.
func openDB(path string, o bbolt.Options) (*bbolt.DB, *os.File, error) {
	for attempt := 1; ; attempt++ {
		if err := checkFile(path); err != nil {
			return nil, nil, err
		}
		// A panic inside bbolt.Open leaves its file open and locked;
		// the file is kept here to be closed then.
		var file *os.File
		var db *bbolt.DB
		o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		}
		err := guard(path, func() (err error) {
			db, err = bbolt.Open(path, 0o600, &o)
			return err
		})
		var damaged *DamagedError
		switch {
		case errors.As(err, &damaged):
			if file != nil {
				_ = file.Close()
			}
			return nil, nil, err
		case errors.Is(err, bberrors.ErrTimeout):
			return nil, nil, fmt.Errorf("bolt: open %s: %w", path, ErrInUse)
		case errors.Is(err, bberrors.ErrInvalid), errors.Is(err, bberrors.ErrChecksum), errors.Is(err, bberrors.ErrVersionMismatch):
			return nil, nil, &DamagedError{Path: path, Why: err.Error()}
		case err != nil:
			return nil, nil, fmt.Errorf("bolt: open %s: %w", path, err)
		}
		if !replaced(file, path) {
			return db, file, nil
		}
		_ = guard(path, db.Close)
		if attempt == 3 {
			return nil, nil, fmt.Errorf("bolt: open %s: the file was replaced %d times while parley waited for its lock: %w", path, attempt, ErrInUse)
		}
	}
}

// replaced reports whether path no longer names the open file f.
func replaced(f *os.File, path string) bool {
	open, err1 := f.Stat()
	now, err2 := os.Stat(path)
	return err1 == nil && err2 == nil && !os.SameFile(open, now)
}

// initSchema checks the version before creating anything, so that a newer
// file is not modified by an older binary.
func initSchema(tx *bbolt.Tx) error {
	if meta := tx.Bucket(bucketMeta); meta != nil {
		if v := meta.Get(keySchema); v != nil {
			n, err := strconv.ParseUint(string(v), 10, 32)
			if err != nil {
				return fmt.Errorf("unreadable schema version %q", v)
			}
			if n > SchemaVersion {
				return fmt.Errorf("file has schema version %d, this parley reads up to %d: %w",
					n, SchemaVersion, core.ErrSchemaTooNew)
			}
		}
	}
	for _, name := range allBuckets {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	if err := markPlaceholders(tx); err != nil {
		return err
	}
	meta := tx.Bucket(bucketMeta)
	if v := meta.Get(keySchema); v != nil && string(v) != "1" {
		return nil // current
	}
	// New, or version 1: index the ledger by session (a new file's ledger
	// is empty).
	if err := indexLedger(tx); err != nil {
		return fmt.Errorf("upgrade to schema %d: %w", SchemaVersion, err)
	}
	return meta.Put(keySchema, []byte(strconv.Itoa(SchemaVersion)))
}

// Close waits for queued writes to commit and closes the file. Later writes
// return ErrClosed; it is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.reqs)
		s.mu.Unlock()
		<-s.done
		if d := s.broken.Load(); d != nil {
			// bbolt may hold its write lock for good after a
			// panic (see guardWrite), and its Close waits for it.
			// Closing the file releases the lock on it, so that a
			// restored file can be opened; the mapping goes with
			// the process.
			_ = s.file.Close()
			s.closeErr = fmt.Errorf("bolt: close: %w", d)
			return
		}
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("bolt: close: %w", err)
		}
	})
	return s.closeErr
}

// view runs a read transaction. Reads do not queue behind the committer:
// bbolt lets them run next to the one write transaction. Damage found on
// the way (bbolt panicking or faulting on what it read) is the caller's
// *DamagedError, not a crash.
func (s *Store) view(ctx context.Context, fn func(*bbolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return guard(s.path, func() error { return s.db.View(fn) })
}

// clock is the time defaults are filled with, in UTC and without the
// monotonic reading, so that what Append and friends return is exactly what
// a later read decodes.
func (s *Store) clock() time.Time { return s.now().Round(0).UTC() }
