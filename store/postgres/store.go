package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// DefaultMaxEvents is the event log's bound when Options.MaxEvents is zero,
// as for store/bolt.
const DefaultMaxEvents = 10000

// ErrClosed is returned by writes to a Store after Close.
var ErrClosed = errors.New("postgres: store is closed")

// Options tune a Store. The zero value is a durable store with the defaults.
type Options struct {
	// MaxEvents bounds the event log: at least this many of the newest
	// events are kept. Zero means DefaultMaxEvents. Instances sharing a
	// database should agree on it; each trims by its own.
	MaxEvents int
	// Now is the clock for message and event times and message ids. It is
	// called concurrently. Nil means time.Now.
	Now func() time.Time
	// MaxConns caps the connections this instance opens; zero means
	// pgxpool's default (the larger of 4 and the number of CPUs). One of
	// them is the committer's, held only while it writes a group.
	MaxConns int32
	// Instance is the holder of the leases this store acquires; empty
	// means core.NewInstanceID().
	Instance core.InstanceID
}

// Store is core.Store on a PostgreSQL database, shared by every parley
// instance that opens it. It is safe for concurrent use. See the package
// documentation for the design.
type Store struct {
	pool      *pgxpool.Pool
	now       func() time.Time
	ids       core.SessionIDs // for CreateSession without an id, ordered by now
	maxEvents uint64
	slack     uint64
	instance  core.InstanceID

	// mu is held shared while handing a write to the committer and
	// exclusively by Close, so that no write is sent on a closed channel.
	mu     sync.RWMutex
	closed bool
	reqs   chan *writeReq
	done   chan struct{} // closed when the committer has exited

	closeOnce sync.Once

	presenceGen atomic.Uint64 // numbers this instance's announcements (notify_presence.go)
	// pacePrune is when this store's next take prunes idle pacing rows
	// (unix nanoseconds, pace.go); one per instance is enough, the rows
	// are everyone's.
	pacePrune atomic.Int64
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url (a postgres:// URL or a key=value
// connection string, as libpq takes them), creates or migrates its schema
// (see SchemaVersion) and returns the store. It fails with an error wrapping
// core.ErrSchemaTooNew, and changes nothing, when a newer parley wrote the
// database. ctx bounds the connection and the migration only.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.MaxEvents <= 0 {
		opts.MaxEvents = DefaultMaxEvents
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Instance == "" {
		opts.Instance = core.NewInstanceID()
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	// Acknowledged means on disk, whatever the server's default; a URL
	// that sets synchronous_commit itself is the operator's choice.
	if _, ok := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; !ok {
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open %s: %w", cfg.ConnConfig.Host, err)
	}
	maxEvents := uint64(opts.MaxEvents)
	s := &Store{
		pool:      pool,
		now:       opts.Now,
		maxEvents: maxEvents,
		slack:     maxEvents/8 + 1,
		instance:  opts.Instance,
		reqs:      make(chan *writeReq, maxGroup),
		done:      make(chan struct{}),
	}
	go s.commitLoop()
	return s, nil
}

// Close waits for queued writes to commit and closes the connections. Later
// writes return ErrClosed; it is safe to call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		close(s.reqs)
		s.mu.Unlock()
		<-s.done
		s.pool.Close()
	})
	return nil
}

// Check reports whether the database answers and holds the schema this
// parley writes.
func (s *Store) Check(ctx context.Context) error {
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version); err != nil {
		return fmt.Errorf("postgres: check: %w", err)
	}
	if version != SchemaVersion {
		return fmt.Errorf("postgres: check: the database has schema version %d, this parley writes %d", version, SchemaVersion)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM counters`).Scan(&n); err != nil || n != 1 {
		return fmt.Errorf("postgres: check: the counters row is missing (%d rows): %v", n, err)
	}
	return nil
}

// clock is the time defaults are filled with, in UTC and without the
// monotonic reading, so that what Append and friends return is exactly what
// a later read decodes.
func (s *Store) clock() time.Time { return s.now().Round(0).UTC() }

// direct runs fn in a transaction of its own, outside the committer: for
// writes that assign no id or seq and touch no session, which need no
// place in the commit order. A deadlock or serialization failure (two
// instances upserting the same rows) is retried.
func (s *Store) direct(ctx context.Context, fn func(pgx.Tx) error) error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	for attempt := 0; ; attempt++ {
		err := pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil || !retryable(err) || attempt == maxRetries {
			return err
		}
	}
}
