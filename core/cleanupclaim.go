package core

import (
	"context"
	"time"
)

// CleanupClaimer shares the cleanup ledger's due deletions among parley
// instances that share a store, as DeliveryClaimer shares the journal: a
// due row is deleted by the one instance holding its claim. A claim
// expires ttl after it was taken or last renewed, judged by the store's
// clock, so the deletions of an instance that died are taken over by
// another once they expire, and those of an instance that stopped cleanly
// (it releases them) at once. instance names the claimant, one per
// process. A store used by one instance (bbolt) does not implement it: its
// due rows are all its own, replayed at start-up.
type CleanupClaimer interface {
	// ClaimDueCleanup records rows, marked due, as AddCleanup does, and
	// claims them for instance until ttl from now, in one transaction. A
	// row another instance already holds (unexpired) is left as it is: it
	// is already due and being deleted there. It returns the refs of the
	// rows instance now holds.
	ClaimDueCleanup(ctx context.Context, instance string, ttl time.Duration, rows ...CleanupEntry) ([]MessageRef, error)
	// ClaimPendingCleanup claims for instance up to limit due rows that
	// nobody holds (never claimed, released, or their claim expired),
	// oldest first. Rows held by an instance (this one included) or being
	// claimed at that moment are passed over, not waited for.
	ClaimPendingCleanup(ctx context.Context, instance string, limit int, ttl time.Duration) ([]CleanupEntry, error)
	// RenewCleanupClaims extends the claims instance holds on refs to ttl
	// from now and returns the refs it still holds: a row taken over by
	// another instance, or removed meanwhile, is left out.
	RenewCleanupClaims(ctx context.Context, instance string, refs []MessageRef, ttl time.Duration) ([]MessageRef, error)
	// ReleaseCleanupClaims gives up the claims instance holds on refs, so
	// that another instance takes them at once rather than at expiry (a
	// clean stop). The rows stay due; claims held by others are left
	// alone.
	ReleaseCleanupClaims(ctx context.Context, instance string, refs []MessageRef) error
}
