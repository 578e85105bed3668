package bolt

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// Pairing: requests waiting for the operator, by code, and the people
// admitted, by origin and actor id. Both are small (a few requests per
// platform, one row per admitted person) and read whole.
var (
	bucketPairing  = []byte("pairing")
	bucketAdmitted = []byte("admitted")
)

var _ core.PairingStore = (*Store)(nil)

func admittedKey(o core.Origin, actorID string) []byte {
	return []byte(string(o) + "\x00" + actorID)
}

// PutPairing implements core.PairingStore.
func (s *Store) PutPairing(ctx context.Context, r core.PairingRequest) error {
	if r.Code == "" || r.Origin == "" || r.Actor.ID == "" {
		return fmt.Errorf("bolt: put pairing: code, origin and actor are required: %w", core.ErrInvalid)
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("bolt: put pairing: %w", err)
	}
	err = s.update(ctx, func(w *wtx) error {
		b := w.Bucket(bucketPairing)
		var stale [][]byte
		err := b.ForEach(func(k, v []byte) error {
			var old core.PairingRequest
			if json.Unmarshal(v, &old) == nil && old.Origin == r.Origin && old.Actor.ID == r.Actor.ID {
				stale = append(stale, k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range stale {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return b.Put([]byte(r.Code), val)
	})
	if err != nil {
		return fmt.Errorf("bolt: put pairing: %w", err)
	}
	return nil
}

// Pairings implements core.PairingStore.
func (s *Store) Pairings(ctx context.Context) ([]core.PairingRequest, error) {
	var out []core.PairingRequest
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPairing).ForEach(func(_, v []byte) error {
			var r core.PairingRequest
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: pairings: %w", err)
	}
	slices.SortFunc(out, func(a, b core.PairingRequest) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// takePairing removes and returns the request with code.
func takePairing(tx *bbolt.Tx, code string) (core.PairingRequest, error) {
	b := tx.Bucket(bucketPairing)
	v := b.Get([]byte(code))
	if v == nil {
		return core.PairingRequest{}, fmt.Errorf("pairing code %s: %w", code, core.ErrNotFound)
	}
	var r core.PairingRequest
	if err := json.Unmarshal(v, &r); err != nil {
		return core.PairingRequest{}, err
	}
	return r, b.Delete([]byte(code))
}

// DeletePairing implements core.PairingStore.
func (s *Store) DeletePairing(ctx context.Context, code string) (core.PairingRequest, error) {
	var r core.PairingRequest
	err := s.update(ctx, func(w *wtx) error {
		var err error
		r, err = takePairing(w.Tx, code)
		return err
	})
	if err != nil {
		return core.PairingRequest{}, fmt.Errorf("bolt: delete pairing: %w", err)
	}
	return r, nil
}

// ApprovePairing implements core.PairingStore.
func (s *Store) ApprovePairing(ctx context.Context, code string, at time.Time) (core.Admission, error) {
	var a core.Admission
	err := s.update(ctx, func(w *wtx) error {
		r, err := takePairing(w.Tx, code)
		if err != nil {
			return err
		}
		a = core.Admission{Origin: r.Origin, Actor: r.Actor, Code: r.Code, Approved: at}
		val, err := json.Marshal(a)
		if err != nil {
			return err
		}
		return w.Bucket(bucketAdmitted).Put(admittedKey(a.Origin, a.Actor.ID), val)
	})
	if err != nil {
		return core.Admission{}, fmt.Errorf("bolt: approve pairing: %w", err)
	}
	return a, nil
}

// Admissions implements core.PairingStore.
func (s *Store) Admissions(ctx context.Context) ([]core.Admission, error) {
	var out []core.Admission
	err := s.view(ctx, func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketAdmitted).ForEach(func(_, v []byte) error {
			var a core.Admission
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			out = append(out, a)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("bolt: admissions: %w", err)
	}
	return out, nil
}
