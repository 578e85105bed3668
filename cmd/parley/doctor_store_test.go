package main

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/store/postgres"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

// doctor's store check against a real PostgreSQL: an empty database, one
// with this parley's schema, one a newer parley wrote, and a server that
// is gone, each with what it means and the fix; the data directory's
// check then speaks of files only.
func TestDoctorStoreFindings(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	url := "PARLEY_STORE_URL=" + srv.URL

	_, fs := runDoctor(t, url)
	wantFinding(t, fs, "store", true, "PostgreSQL 1", "no parley tables yet", "parley serve creates them")
	wantFinding(t, fs, "data_dir", true, "it holds files, the state is in the database of [store] url")

	st, err := postgres.Open(ctx, srv.URL, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	_, fs = runDoctor(t, url)
	wantFinding(t, fs, "store", true, fmt.Sprintf("schema version %d, this parley's", postgres.SchemaVersion), "no lease held")

	// A running instance's lease: doctor names its holder.
	st, err = postgres.Open(ctx, srv.URL, postgres.Options{Instance: "host-1-cafe"})
	if err != nil {
		t.Fatal(err)
	}
	if _, granted, err := st.AcquireLease(ctx, "telegram/poll/1", time.Minute); err != nil || !granted {
		t.Fatalf("acquire: granted %v, %v", granted, err)
	}
	_, fs = runDoctor(t, url)
	wantFinding(t, fs, "store", true, "leases: telegram/poll/1 held by host-1-cafe")
	st.Close()

	conn, err := pgx.Connect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	code, fs := runDoctor(t, url)
	if code != exitFailed {
		t.Errorf("exit %d with a newer schema", code)
	}
	wantFinding(t, fs, "store", false, "schema version 99, written by a newer parley", postgres.ErrSchemaTooNewFix)

	if err := srv.Stop("fast"); err != nil {
		t.Fatal(err)
	}
	code, fs = runDoctor(t, url)
	if code != exitFailed {
		t.Errorf("exit %d with the server gone", code)
	}
	f := wantFinding(t, fs, "store", false, "cannot reach the database of [store] url", "start PostgreSQL (15 or newer)", "PARLEY_STORE_URL")
	if strings.Contains(f.Problem, "password=") {
		t.Errorf("the finding shows connection secrets: %s", f.Problem)
	}

	// serve stops on the same finding, before it opens anything.
	var errOut bytes.Buffer
	env := []string{"HOME=" + t.TempDir(), "PARLEY_DATA_DIR=" + t.TempDir(), "PARLEY_HTTP_LISTEN=127.0.0.1:0", url}
	if code := Run(ctx, []string{"serve"}, env, nil, &bytes.Buffer{}, &errOut); code != exitUsage {
		t.Fatalf("serve with the database gone: exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "cannot reach the database of [store] url") {
		t.Errorf("serve's log does not say why:\n%s", errOut.String())
	}
}

// The judgement of a server and schema doctor could not be shown by the
// test's own server: an old PostgreSQL, an older schema to migrate.
func TestDoctorStoreSchemaJudgement(t *testing.T) {
	f, current := schemaFinding(postgres.Info{ServerVersion: 140010, Server: "14.10", Schema: 1}, 1)
	if current || f.OK || !strings.Contains(f.Problem, "runs PostgreSQL 14.10; parley needs 15 or newer") || !strings.Contains(f.Fix, "upgrade") {
		t.Errorf("PostgreSQL 14: %+v", f)
	}
	f, current = schemaFinding(postgres.Info{ServerVersion: 150004, Server: "15.4", Schema: 2}, 3)
	if current || !f.OK || !strings.Contains(f.Detail, "schema version 2: parley serve will migrate it to 3") {
		t.Errorf("an older schema: %+v", f)
	}
	if _, current = schemaFinding(postgres.Info{ServerVersion: 170000, Server: "17.0", Schema: 3}, 3); !current {
		t.Error("the current schema is not current")
	}
}
