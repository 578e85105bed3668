package bolt

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// On a bbolt file the one instance holds every claim: claims are granted
// to any claimant, again and again, a batch claim is the journal up to its
// bound, renewals keep everything and releasing changes nothing.
func TestClaimsAlwaysGranted(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{NoSync: true})
	evs, err := s.AppendEvents(ctx,
		core.Event{Kind: core.EventTurnComplete, Session: "a"},
		core.Event{Kind: core.EventTurnComplete, Session: "b"},
		core.Event{Kind: core.EventTurnComplete, Session: "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []core.InstanceID{"one", "another"} {
		if ok, err := s.ClaimDelivery(ctx, evs[0].Seq, who, time.Second); !ok || err != nil {
			t.Errorf("claim by %s: %v, %v; want granted", who, ok, err)
		}
	}
	page, err := s.ClaimDeliveries(ctx, evs[0].Seq, evs[1].Seq, 0, "one", time.Second)
	if err != nil || len(page) != 1 || page[0].Event.Seq != evs[1].Seq {
		t.Errorf("ClaimDeliveries after the first up to the second: %+v, %v; want the second", page, err)
	}
	if page, err := s.ClaimDeliveries(ctx, 0, evs[2].Seq, 2, "one", time.Second); err != nil || len(page) != 2 {
		t.Errorf("ClaimDeliveries limited to 2: %d events, %v", len(page), err)
	}
	seqs := []uint64{evs[0].Seq, evs[2].Seq}
	if held, err := s.RenewClaims(ctx, "one", seqs, time.Second); !slices.Equal(held, seqs) || err != nil {
		t.Errorf("RenewClaims: %v, %v; want all held", held, err)
	}
	if err := s.ReleaseClaims(ctx, "one", seqs); err != nil {
		t.Error(err)
	}
	if ds, err := s.Deliveries(ctx, 0, 0); len(ds) != 3 || err != nil {
		t.Errorf("the journal after claims: %d events, %v; want the 3 untouched", len(ds), err)
	}
}
