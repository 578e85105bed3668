package bolt

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/parley-chat/parley/store/storetest"
)

// engine opens stores for the shared suite with fast, non-durable commits,
// folding inbox_recent into inbox_by_session every foldAt appends (0: the
// default), so that reads cross the boundary between folded and recent
// entries everywhere.
func engine(foldAt uint64) storetest.Engine {
	open := func(t *testing.T, path string, o storetest.Options) storetest.Store {
		s := openAt(t, path, Options{Now: o.Now, MaxEvents: o.MaxEvents, NoSync: true})
		if foldAt > 0 {
			s.foldAt = foldAt
		}
		return s
	}
	return storetest.Engine{
		Open: func(t *testing.T, o storetest.Options) (storetest.Store, storetest.Again) {
			path := filepath.Join(t.TempDir(), "parley.db")
			return open(t, path, o), func(t *testing.T, o storetest.Options) storetest.Store { return open(t, path, o) }
		},
	}
}

// TestStore runs the store suite with the default fold, a fold after every
// append, every few appends and never.
func TestStore(t *testing.T) {
	for _, foldAt := range []uint64{0, 1, 3, 7, 1 << 40} {
		name := fmt.Sprint("foldAt=", foldAt)
		if foldAt == 0 {
			name = fmt.Sprint("foldAt=", defaultFoldAt)
		}
		t.Run(name, func(t *testing.T) { storetest.Run(t, engine(foldAt)) })
	}
}
