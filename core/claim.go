package core

import (
	"context"
	"time"
)

// DeliveryClaimer shares the delivery journal among parley instances that
// share a store: a journaled event's operations are sent by the one
// instance holding its claim. A claim expires ttl after it was taken or
// last renewed, judged by the store's clock, so the operations of an
// instance that died are taken over by another once it expires; the keys
// confirmed before (Delivery.Done) are skipped. A store used by one
// instance grants every claim. instance names the claimant, one per
// process.
type DeliveryClaimer interface {
	// ClaimDelivery claims the journaled event seq for instance until ttl
	// from now. A store shared by several instances reports false, taking
	// nothing, when another instance holds an unexpired claim on it or it
	// is no longer journaled; a claim instance holds already is renewed.
	ClaimDelivery(ctx context.Context, seq uint64, instance InstanceID, ttl time.Duration) (bool, error)
	// ClaimDeliveries claims for instance up to limit journaled events
	// with after < Seq <= upTo that nobody holds (unclaimed, or their
	// claim expired), oldest first, and returns them as Deliveries does.
	// Events held by an instance (this one included: it is delivering
	// them), or being claimed at that moment, are passed over, not waited
	// for. A store used by one instance returns every journaled event.
	ClaimDeliveries(ctx context.Context, after, upTo uint64, limit int, instance InstanceID, ttl time.Duration) ([]Delivery, error)
	// RenewClaims extends the claims instance holds on seqs to ttl from
	// now and returns the seqs it still holds: a claim taken over by
	// another instance, or an event finished meanwhile, is left out.
	RenewClaims(ctx context.Context, instance InstanceID, seqs []uint64, ttl time.Duration) ([]uint64, error)
	// ReleaseClaims gives up the claims instance holds on seqs, so that
	// another instance may take them at once rather than at expiry (a
	// clean stop). Claims held by others are left alone.
	ReleaseClaims(ctx context.Context, instance InstanceID, seqs []uint64) error
}
