package bolt

import (
	"context"
	"time"

	"github.com/parley-chat/parley/core"
)

// Journal claims (core.DeliveryClaimer): a bbolt file is opened by one
// process, so the one instance holds every claim. Claiming is granted for
// every journaled event, a batch claim is Deliveries, and renewing and
// releasing have nothing to record.

var _ core.DeliveryClaimer = (*Store)(nil)

// ClaimDelivery implements core.DeliveryClaimer: always granted.
func (s *Store) ClaimDelivery(ctx context.Context, seq uint64, instance core.InstanceID, ttl time.Duration) (bool, error) {
	return true, nil
}

// ClaimDeliveries implements core.DeliveryClaimer: the journal up to upTo
// as Deliveries reads it.
func (s *Store) ClaimDeliveries(ctx context.Context, after, upTo uint64, limit int, instance core.InstanceID, ttl time.Duration) ([]core.Delivery, error) {
	page, err := s.Deliveries(ctx, after, limit)
	for i, d := range page {
		if d.Event.Seq > upTo {
			return page[:i], err
		}
	}
	return page, err
}

// RenewClaims implements core.DeliveryClaimer: every claim is still held.
func (s *Store) RenewClaims(ctx context.Context, instance core.InstanceID, seqs []uint64, ttl time.Duration) ([]uint64, error) {
	return seqs, nil
}

// ReleaseClaims implements core.DeliveryClaimer: nothing to release.
func (s *Store) ReleaseClaims(ctx context.Context, instance core.InstanceID, seqs []uint64) error {
	return nil
}
