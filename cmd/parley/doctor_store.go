package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres"
)

// storeFix says where the database is configured.
const storeFix = "[store] url (PARLEY_STORE_URL)"

// checkStore checks the PostgreSQL database [store] url names: that it
// answers (the connection's error and the fix otherwise), that the server
// is PostgreSQL 15 or newer, and its schema: none yet or an older one is
// fine (parley serve creates or migrates it), a newer one is refused as
// serve would. When the schema is this parley's, doctor opens the store and
// runs its Check, and the platforms' checks use it. It never creates or
// migrates anything. The bbolt file is data_dir's check. Its detail lists
// the leases' holders: which instance runs each single consumer (a
// Telegram poller, a Matrix sync) of those sharing the database.
func (c *checkup) checkStore(ctx context.Context) finding {
	const check = "store"
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	info, err := postgres.Inspect(ctx, c.cfg.Store.URL)
	if err != nil {
		fix := "start PostgreSQL (15 or newer) where " + storeFix + " points, and check the url's host, port, user, password and database; create the database with createdb -O USER NAME"
		if errors.Is(err, context.DeadlineExceeded) {
			fix = "check that the host and port of " + storeFix + " are right and reachable from here (firewall, network), and that PostgreSQL runs there"
		}
		return finding{Check: check, Problem: fmt.Sprintf("cannot reach the database of [store] url: %v", err), Fix: fix}
	}
	if f, current := schemaFinding(info, postgres.SchemaVersion); !current {
		return f
	}
	st, err := postgres.Open(ctx, c.cfg.Store.URL, postgres.Options{})
	var leases []core.LeaseInfo
	if err == nil {
		err = st.Check(ctx)
		if err == nil {
			leases, err = st.Leases(ctx)
		}
		st.Close()
	}
	if err != nil {
		return finding{Check: check, Problem: fmt.Sprintf("the database of [store] url does not check out: %v", err),
			Fix: "run parley doctor again; if it fails the same way, restore the database from a backup"}
	}
	c.storeReady = true
	return finding{Check: check, OK: true, Detail: fmt.Sprintf("PostgreSQL %s answers; schema version %d, this parley's; %s", info.Server, info.Schema, leaseHolders(leases))}
}

// leaseHolders says who holds each lease, for doctor's store detail.
func leaseHolders(leases []core.LeaseInfo) string {
	var held []string
	for _, l := range leases {
		if l.Held {
			held = append(held, fmt.Sprintf("%s held by %s", l.Name, l.Holder))
		}
	}
	if len(held) == 0 {
		return "no lease held (no parley serve holds a single consumer now)"
	}
	return "leases: " + strings.Join(held, ", ")
}

// schemaFinding judges the server's version and the database's schema
// against the schema version current, and reports whether the schema is
// that one (then the store is opened and checked).
func schemaFinding(info postgres.Info, current int) (finding, bool) {
	const check = "store"
	switch {
	case info.ServerVersion < postgres.MinServerVersion:
		return finding{Check: check, Problem: fmt.Sprintf("the database of [store] url runs PostgreSQL %s; parley needs 15 or newer", info.Server),
			Fix: "upgrade that server to PostgreSQL 15 or newer, or point " + storeFix + " at one"}, false
	case info.Schema > current:
		return finding{Check: check, Problem: fmt.Sprintf("the database of [store] url has schema version %d, written by a newer parley (this one knows up to %d)", info.Schema, current),
			Fix: postgres.ErrSchemaTooNewFix}, false
	case info.Schema == 0:
		return finding{Check: check, OK: true, Detail: fmt.Sprintf("PostgreSQL %s answers; no parley tables yet: parley serve creates them (schema version %d), or parley migrate --from DATA_DIR copies a data directory in", info.Server, current)}, false
	case info.Schema < current:
		return finding{Check: check, OK: true, Detail: fmt.Sprintf("PostgreSQL %s answers; schema version %d: parley serve will migrate it to %d", info.Server, info.Schema, current)}, false
	}
	return finding{}, true
}
