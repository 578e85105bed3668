package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(holderEnv); url != "" {
		holdUntilKilled(url)
	}
	pgtest.Main(m)
}

// openURL opens a store on url with the suite's options and closes it when
// the test ends.
func openURL(t *testing.T, url string, o storetest.Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Options{Now: o.Now, MaxEvents: o.MaxEvents})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// engine gives every test of the suite a server of its own.
var engine = storetest.Engine{
	Open: func(t *testing.T, o storetest.Options) (storetest.Store, storetest.Again) {
		srv := pgtest.Start(t)
		return openURL(t, srv.URL, o), func(t *testing.T, o storetest.Options) storetest.Store {
			return openURL(t, srv.URL, o)
		}
	},
	Shared: true,
}

func TestStore(t *testing.T) {
	t.Parallel()
	storetest.Run(t, engine)
}
