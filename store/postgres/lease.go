package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
)

// Leases (core.Leaser) live in the table leases, one row per name that was
// acquired: a released lease keeps its row with no holder, so that the
// token keeps increasing per name, until PruneLeases removes the rows free
// for long (core.LeaseRowsKept). Expiry is judged by the database's clock
// alone (clock_timestamp(), the time the statement runs, not the start of
// its transaction); the instances' clocks never enter a statement. Each
// operation is one statement, so that it is atomic without a transaction of
// its own.
//
// A fenced cursor write locks the lease row FOR SHARE in the statement that
// writes the cursor and writes only when the row is still the caller's
// holding: a takeover (an UPDATE of the row) waits for a fenced write in
// flight to commit, and a fenced write that comes after a takeover finds
// the new token and writes nothing. Renewals wait for fenced writes in
// flight likewise, for the milliseconds they take.

var _ core.Leaser = (*Store)(nil)

// Instance returns the id this store acquires leases as.
func (s *Store) Instance() core.InstanceID { return s.instance }

// leaseMicros is ttl as the bigint the statements multiply an interval by.
func leaseMicros(ttl time.Duration) (int64, error) {
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("postgres: lease ttl %s is too short", ttl)
	}
	return ttl.Microseconds(), nil
}

// writable returns ErrClosed after Close.
func (s *Store) writable() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// AcquireLease implements core.Leaser in one statement: it takes a row that is
// free, expired or this instance's with a fresh token, or inserts the
// first; when it takes nothing it reads the current holding (from the
// statement's snapshot, which may not show a row inserted concurrently:
// then the lease is zero).
func (s *Store) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	us, err := leaseMicros(ttl)
	if err != nil {
		return core.Lease{}, false, err
	}
	if name == "" {
		return core.Lease{}, false, errors.New("postgres: acquire: empty lease name")
	}
	if err := s.writable(); err != nil {
		return core.Lease{}, false, err
	}
	l := core.Lease{Name: name}
	var granted bool
	var holder string
	err = s.pool.QueryRow(ctx, `
WITH taken AS (
	INSERT INTO leases AS l (name, holder, token, expires)
	VALUES ($1, $2, 1, clock_timestamp() + $3::bigint * interval '1 microsecond')
	ON CONFLICT (name) DO UPDATE
		SET holder = excluded.holder, token = l.token + 1, expires = excluded.expires
		WHERE l.holder IS NULL OR l.holder = excluded.holder OR l.expires <= clock_timestamp()
	RETURNING holder, token, expires
)
SELECT true, holder, token, expires FROM taken
UNION ALL
SELECT false, coalesce(holder, ''), token, expires FROM leases WHERE name = $1 AND NOT EXISTS (SELECT FROM taken)`,
		name, string(s.instance), us).Scan(&granted, &holder, &l.Token, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Lease{}, false, nil
	}
	if err != nil {
		return core.Lease{}, false, fmt.Errorf("postgres: acquire lease %s: %w", name, err)
	}
	l.Holder = core.InstanceID(holder)
	return l, granted, nil
}

// RenewLease implements core.Leaser: it extends the row while it is still l's
// holding and has not expired.
func (s *Store) RenewLease(ctx context.Context, l core.Lease, ttl time.Duration) (core.Lease, error) {
	us, err := leaseMicros(ttl)
	if err != nil {
		return core.Lease{}, err
	}
	if err := s.writable(); err != nil {
		return core.Lease{}, err
	}
	err = s.pool.QueryRow(ctx, `
UPDATE leases SET expires = clock_timestamp() + $4::bigint * interval '1 microsecond'
WHERE name = $1 AND holder = $2 AND token = $3 AND expires > clock_timestamp()
RETURNING expires`, l.Name, string(l.Holder), l.Token, us).Scan(&l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.Lease{}, fmt.Errorf("postgres: renew lease %s (token %d): %w", l.Name, l.Token, core.ErrLeaseLost)
	}
	if err != nil {
		return core.Lease{}, fmt.Errorf("postgres: renew lease %s: %w", l.Name, err)
	}
	return l, nil
}

// ReleaseLease implements core.Leaser: the row keeps its token and loses its
// holder, so that the next AcquireLease by anyone takes it at once.
func (s *Store) ReleaseLease(ctx context.Context, l core.Lease) error {
	if err := s.writable(); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `UPDATE leases SET holder = NULL, expires = clock_timestamp()
WHERE name = $1 AND holder = $2 AND token = $3`, l.Name, string(l.Holder), l.Token)
	if err != nil {
		return fmt.Errorf("postgres: release lease %s: %w", l.Name, err)
	}
	return nil
}

// Leases implements core.Leaser, by name.
func (s *Store) Leases(ctx context.Context) ([]core.LeaseInfo, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, coalesce(holder, ''), token, expires,
	holder IS NOT NULL AND expires > clock_timestamp() FROM leases ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("postgres: leases: %w", err)
	}
	var out []core.LeaseInfo
	for rows.Next() {
		var i core.LeaseInfo
		var holder string
		if err := rows.Scan(&i.Name, &holder, &i.Token, &i.Expires, &i.Held); err != nil {
			rows.Close()
			return nil, fmt.Errorf("postgres: leases: %w", err)
		}
		i.Holder = core.InstanceID(holder)
		i.Mine = i.Holder == s.instance
		out = append(out, i)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: leases: %w", err)
	}
	return out, nil
}

// fence is the common table expression that finds, and locks against a
// takeover until the statement commits, the lease row of the holding
// ($3 name, $4 holder, $5 token) if it is current.
const fence = `WITH l AS (
	SELECT FROM leases WHERE name = $3 AND holder = $4 AND token = $5 AND expires > clock_timestamp() FOR SHARE
)`

// SetCursorFenced implements core.Leaser: SetCursor in the statement that
// checks the holding, so that a holder that lost the lease changes
// nothing, whenever its write arrives.
func (s *Store) SetCursorFenced(ctx context.Context, name, value string, l core.Lease) error {
	if name == "" {
		return errors.New("postgres: set cursor: empty name")
	}
	if err := s.writable(); err != nil {
		return err
	}
	write := fence + `, w AS (
	INSERT INTO cursors (name, value) SELECT $1, $2 FROM l
	ON CONFLICT (name) DO UPDATE SET value = excluded.value
)
SELECT count(*) FROM l`
	if value == "" {
		write = fence + `, w AS (
	DELETE FROM cursors WHERE name = $1 AND $2::bytea = '' AND EXISTS (SELECT FROM l)
)
SELECT count(*) FROM l`
	}
	var n int
	err := s.pool.QueryRow(ctx, write, []byte(name), []byte(value), l.Name, string(l.Holder), l.Token).Scan(&n)
	if err != nil {
		return fmt.Errorf("postgres: set cursor %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("postgres: set cursor %q under lease %s (token %d): %w", name, l.Name, l.Token, core.ErrLeaseLost)
	}
	return nil
}

var _ core.LeasePruner = (*Store)(nil)

// PruneLeases implements core.LeasePruner in one statement, by the
// database's clock: a released row's expiry is the release. A row taken
// again meanwhile (its expiry moved past the cut) is left alone: the
// delete re-checks its condition on the row it waited for.
func (s *Store) PruneLeases(ctx context.Context, freeFor time.Duration) (int, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE expires < clock_timestamp() - $1::bigint * interval '1 microsecond'`,
		max(freeFor, 0).Microseconds())
	if err != nil {
		return 0, fmt.Errorf("postgres: prune leases: %w", err)
	}
	return int(tag.RowsAffected()), nil
}
