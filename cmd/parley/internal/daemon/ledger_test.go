package daemon

import (
	"path/filepath"
	"testing"

	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/postgres"
)

// The outbox shares pacing through a PostgreSQL store, and paces alone on
// bbolt (one instance), exactly as before shared pacing.
func TestPaceLedgerOfTheStore(t *testing.T) {
	if paceLedger(&postgres.Store{}) == nil {
		t.Error("the outbox gets no pacing ledger on PostgreSQL")
	}
	st, err := bolt.Open(filepath.Join(t.TempDir(), DBFile), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if l := paceLedger(st); l != nil {
		t.Errorf("the outbox gets a pacing ledger on bbolt: %T", l)
	}
}
