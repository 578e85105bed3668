package core

import (
	"context"
	"time"
)

// PairingRequest is a person not on an adapter's allow-list who asked to
// be admitted from a private chat, waiting for the operator with a
// one-time code.
type PairingRequest struct {
	Code    string    `json:"code"`
	Origin  Origin    `json:"origin"`
	Actor   Actor     `json:"actor"`
	Place   Place     `json:"place"`
	Created time.Time `json:"created"`
	// Told is when the person was last given the code.
	Told time.Time `json:"told"`
}

// Admission is a person admitted to an origin by a pairing the operator
// approved. It adds to the configured allow-list; it does not replace it.
type Admission struct {
	Origin   Origin    `json:"origin"`
	Actor    Actor     `json:"actor"`
	Code     string    `json:"code"`
	Approved time.Time `json:"approved"`
}

// PairingStore is the optional part of a Store that keeps pairing
// requests and admissions (store/bolt implements it). Every method blocks
// until its effect is durable, and returns an error wrapping ErrNotFound
// for an unknown code.
type PairingStore interface {
	// PutPairing stores r, replacing any request with its Code or of its
	// origin and actor.
	PutPairing(ctx context.Context, r PairingRequest) error
	// Pairings returns every request, oldest first.
	Pairings(ctx context.Context) ([]PairingRequest, error)
	// DeletePairing removes the request with code.
	DeletePairing(ctx context.Context, code string) (PairingRequest, error)
	// ApprovePairing turns the request with code into an Admission, in one
	// transaction.
	ApprovePairing(ctx context.Context, code string, at time.Time) (Admission, error)
	// Admissions returns every admission.
	Admissions(ctx context.Context) ([]Admission, error)
}

// Pairer says whether the Handler (commands.Service) pairs strangers at
// all, so that an adapter sends core.Pair, and looks anything up for a
// stranger, only when it does. Adapters are given it explicitly
// (platform.Deps.Pairer), not by asserting the Handler, which a wrapper
// would hide.
type Pairer interface {
	// Pairing reports whether core.Pair commands are answered. It does
	// not block.
	Pairing() bool
}
