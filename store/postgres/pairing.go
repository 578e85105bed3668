package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
)

// Pairing: requests waiting for the operator, by code, and the people
// admitted, by origin and actor id. Both are small and read whole.

var _ core.PairingStore = (*Store)(nil)

// PutPairing implements core.PairingStore.
func (s *Store) PutPairing(ctx context.Context, r core.PairingRequest) error {
	if r.Code == "" || r.Origin == "" || r.Actor.ID == "" {
		return fmt.Errorf("postgres: put pairing: code, origin and actor are required: %w", core.ErrInvalid)
	}
	val, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("postgres: put pairing: %w", err)
	}
	err = s.direct(ctx, func(tx pgx.Tx) error {
		var b pgx.Batch
		b.Queue(`DELETE FROM pairing WHERE origin = $1 AND actor = $2`, []byte(r.Origin), []byte(r.Actor.ID))
		b.Queue(`INSERT INTO pairing VALUES ($1, $2, $3, $4)
			ON CONFLICT (code) DO UPDATE SET origin = excluded.origin, actor = excluded.actor, data = excluded.data`,
			[]byte(r.Code), []byte(r.Origin), []byte(r.Actor.ID), val)
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("postgres: put pairing: %w", err)
	}
	return nil
}

// Pairings implements core.PairingStore.
func (s *Store) Pairings(ctx context.Context) ([]core.PairingRequest, error) {
	rows, err := s.pool.Query(ctx, `SELECT data FROM pairing ORDER BY code`)
	if err != nil {
		return nil, fmt.Errorf("postgres: pairings: %w", err)
	}
	var out []core.PairingRequest
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
		var r core.PairingRequest
		err := json.Unmarshal(data, &r)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: pairings: %w", err)
	}
	slices.SortStableFunc(out, func(a, b core.PairingRequest) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// takePairing removes and returns the request with code.
func takePairing(ctx context.Context, tx pgx.Tx, code string) (core.PairingRequest, error) {
	var data []byte
	err := tx.QueryRow(ctx, `DELETE FROM pairing WHERE code = $1 RETURNING data`, []byte(code)).Scan(&data)
	if errors.Is(err, pgx.ErrNoRows) {
		return core.PairingRequest{}, fmt.Errorf("pairing code %s: %w", code, core.ErrNotFound)
	}
	if err != nil {
		return core.PairingRequest{}, err
	}
	var r core.PairingRequest
	return r, json.Unmarshal(data, &r)
}

// DeletePairing implements core.PairingStore.
func (s *Store) DeletePairing(ctx context.Context, code string) (core.PairingRequest, error) {
	var r core.PairingRequest
	err := s.direct(ctx, func(tx pgx.Tx) error {
		var err error
		r, err = takePairing(ctx, tx, code)
		return err
	})
	if err != nil {
		return core.PairingRequest{}, fmt.Errorf("postgres: delete pairing: %w", err)
	}
	return r, nil
}

// ApprovePairing implements core.PairingStore.
func (s *Store) ApprovePairing(ctx context.Context, code string, at time.Time) (core.Admission, error) {
	var a core.Admission
	err := s.direct(ctx, func(tx pgx.Tx) error {
		r, err := takePairing(ctx, tx, code)
		if err != nil {
			return err
		}
		a = core.Admission{Origin: r.Origin, Actor: r.Actor, Code: r.Code, Approved: at}
		val, err := json.Marshal(a)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO admitted VALUES ($1, $2, $3)
			ON CONFLICT (origin, actor) DO UPDATE SET data = excluded.data`,
			[]byte(a.Origin), []byte(a.Actor.ID), val)
		return err
	})
	if err != nil {
		return core.Admission{}, fmt.Errorf("postgres: approve pairing: %w", err)
	}
	return a, nil
}

// Admissions implements core.PairingStore.
func (s *Store) Admissions(ctx context.Context) ([]core.Admission, error) {
	rows, err := s.pool.Query(ctx, `SELECT data FROM admitted ORDER BY origin, actor`)
	if err != nil {
		return nil, fmt.Errorf("postgres: admissions: %w", err)
	}
	var out []core.Admission
	var data []byte
	_, err = pgx.ForEachRow(rows, []any{&data}, func() error {
		var a core.Admission
		err := json.Unmarshal(data, &a)
		out = append(out, a)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: admissions: %w", err)
	}
	return out, nil
}
