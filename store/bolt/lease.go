package bolt

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/parley-chat/parley/core"
)

// Leases on bbolt are trivial: only one process can open the file (bbolt
// locks it), so that process holds every lease. AcquireLease and
// RenewLease always grant with token 1 and no expiry, and a fenced write is
// a plain one. The names acquired are remembered in memory only, for
// Leases (doctor, metrics): the daemon takes the same path on both stores.

var _ core.Leaser = (*Store)(nil)

// Instance returns the id this store acquires leases as.
func (s *Store) Instance() core.InstanceID { return s.instance }

// AcquireLease implements core.Leaser: always granted, token 1, never expiring.
func (s *Store) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	if name == "" {
		return core.Lease{}, false, errors.New("bolt: acquire: empty lease name")
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.leases == nil {
		s.leases = map[string]bool{}
	}
	s.leases[name] = true
	return core.Lease{Name: name, Holder: s.instance, Token: 1}, true, nil
}

// RenewLease implements core.Leaser: the lease is still held.
func (s *Store) RenewLease(ctx context.Context, l core.Lease, ttl time.Duration) (core.Lease, error) {
	return l, nil
}

// ReleaseLease implements core.Leaser.
func (s *Store) ReleaseLease(ctx context.Context, l core.Lease) error {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if _, ok := s.leases[l.Name]; ok {
		s.leases[l.Name] = false
	}
	return nil
}

// Leases implements core.Leaser: the leases acquired since Open, by name.
func (s *Store) Leases(ctx context.Context) ([]core.LeaseInfo, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	out := make([]core.LeaseInfo, 0, len(s.leases))
	for name, held := range s.leases {
		l := core.Lease{Name: name, Token: 1}
		if held {
			l.Holder = s.instance
		}
		out = append(out, core.LeaseInfo{Lease: l, Mine: held, Held: held})
	}
	slices.SortFunc(out, func(a, b core.LeaseInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetCursorFenced implements core.Leaser: SetCursor, as this process holds
// every lease.
func (s *Store) SetCursorFenced(ctx context.Context, name, value string, l core.Lease) error {
	return s.SetCursor(ctx, name, value)
}
