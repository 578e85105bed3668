package postgres

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

func TestSchemaVersionIsTheMigrations(t *testing.T) {
	t.Parallel()
	if SchemaVersion != len(migrations) {
		t.Fatalf("SchemaVersion %d, %d migrations", SchemaVersion, len(migrations))
	}
}

// Instances starting at once migrate one after the other: every Open
// succeeds and the schema is created once.
func TestConcurrentOpensMigrateOnce(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			s, err := Open(context.Background(), srv.URL, Options{})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
	s := openURL(t, srv.URL, storetest.Options{})
	if err := s.Check(context.Background()); err != nil {
		t.Error(err)
	}
}

// A database written by a newer parley is refused with both versions and
// the fix named, and left as it was.
func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	storetest.CreateSession(t, s, core.Session{Title: "kept"})
	must(t, s.Close())

	conn, err := pgx.Connect(ctx, srv.URL)
	must(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `UPDATE schema_version SET version = 99`)
	must(t, err)

	_, err = Open(ctx, srv.URL, Options{})
	if !errors.Is(err, core.ErrSchemaTooNew) {
		t.Fatalf("Open: err = %v, want ErrSchemaTooNew", err)
	}
	for _, want := range []string{"version 99", fmt.Sprint("up to ", SchemaVersion), ErrSchemaTooNewFix} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	var v, n int
	must(t, conn.QueryRow(ctx, `SELECT version, (SELECT count(*) FROM sessions) FROM schema_version`).Scan(&v, &n))
	if v != 99 || n != 1 {
		t.Errorf("after the refusal: version %d, %d sessions; want 99 and 1", v, n)
	}
}

// What Append acknowledged survives PostgreSQL stopping as if the machine
// lost power, and the instance carries on after the restart.
func TestAcknowledgedSurvivesCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	sess := storetest.CreateSession(t, s, core.Session{})
	res, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "survives"}, DedupKey: "k"})
	must(t, err)
	must(t, srv.Stop("immediate"))
	must(t, srv.Start())
	// The pool notices its dead connections and dials again.
	var again core.AppendResult
	for range 3 {
		if again, err = s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "redelivered"}, DedupKey: "k"}); err == nil {
			break
		}
	}
	must(t, err)
	if !again.Duplicate || again.Message.ID != res.Message.ID {
		t.Errorf("redelivery after the crash = %+v, want the duplicate of %s", again, res.Message.ID)
	}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// A write the database refuses (a dedup key too long for its index) fails
// its own append only: its neighbours in the group are stored, and it
// leaves no message, event or counter behind.
func TestRefusedWriteFailsAlone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	s := openURL(t, srv.URL, storetest.Options{})
	sess := storetest.CreateSession(t, s, core.Session{})
	long := make([]byte, 10000)
	_, _ = rand.Read(long) // incompressible
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			key := fmt.Sprint("k", i)
			if i == 7 {
				key = string(long)
			}
			_, errs[i] = s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"}, DedupKey: key,
				Events: []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}}})
		})
	}
	wg.Wait()
	t.Logf("the refused append: %.200v", errs[7])
	for i, err := range errs {
		if (err != nil) != (i == 7) {
			t.Errorf("append %d: %v", i, err)
		}
	}
	msgs, err := s.Inbox(ctx, "", "", 0)
	must(t, err)
	evs, err := s.EventsSince(ctx, 0, 0)
	must(t, err)
	last, err := s.LastEventSeq(ctx)
	must(t, err)
	if len(msgs) != 19 || len(evs) != 19 || last != 19 {
		t.Errorf("%d messages, %d events, last seq %d; want 19 of each", len(msgs), len(evs), last)
	}
	// The connection that failed went back to the pool usable.
	for range 10 {
		storetest.AppendText(t, s, sess.ID, "after")
	}
}
