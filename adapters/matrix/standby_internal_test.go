package matrix

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
)

// heldElsewhere is leases another instance holds: no attempt is granted.
// Only AcquireLease is called here.
type heldElsewhere struct{ core.Leaser }

func (heldElsewhere) AcquireLease(_ context.Context, name string, _ time.Duration) (core.Lease, bool, error) {
	return core.Lease{Name: name, Holder: "other", Token: 7}, false, nil
}

// TestStandbySendsWithoutWaiting: on an instance that does not hold the
// sync lease, a keyed send after Check does not wait for a first sync this
// instance will not make; once it holds the lease, sends wait for its
// first sync again (at most firstSyncWait).
func TestStandbySendsWithoutWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &Adapter{echo: newEchoes(), log: slog.New(slog.DiscardHandler)}
		a.echo.armed.Store(true) // as Check leaves it
		s := standby{Leaser: heldElsewhere{}, echo: a.echo}
		if _, granted, _ := s.AcquireLease(t.Context(), "matrix/@parley:example.org", core.LeaseTTL); granted {
			t.Fatal("granted")
		}
		start := time.Now()
		a.waitFirstSync(t.Context())
		if d := time.Since(start); d != 0 {
			t.Errorf("a send on a standby instance waited %s", d)
		}
		a.echo.runBegan() // the lease is held now, the sync starts
		start = time.Now()
		a.waitFirstSync(t.Context())
		if d := time.Since(start); d != firstSyncWait {
			t.Errorf("a send on the syncing instance waited %s, want %s for its first sync", d, firstSyncWait)
		}
	})
}
