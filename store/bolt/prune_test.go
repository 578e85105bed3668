package bolt

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestPrune(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now, MaxEvents: 10})
	t0 := clk.Now()
	sess := createSession(t, s, core.Session{Title: "t"})

	// Old records, made at t0: ten messages with dedup keys (so that
	// Batch 3 takes several transactions), reservation cursors, ledger
	// rows due and not, and an undelivered event.
	appendKeyed := func(key, text string) core.AppendResult {
		t.Helper()
		res, err := s.Append(ctx, core.Append{DedupKey: key, Message: core.Message{
			Session: sess.ID, Role: core.RoleUser, Content: text}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	var oldMsgs []core.Message
	for i := range 10 {
		oldMsgs = append(oldMsgs, appendKeyed(fmt.Sprintf("fake\x00old-%d", i), "old").Message)
	}
	ref := func(id string) core.MessageRef {
		return core.MessageRef{Adapter: "fake", Place: core.Place{Chat: "c"}, ID: id}
	}
	must(t, s.AddCleanup(ctx,
		core.CleanupEntry{Session: sess.ID, Ref: ref("old"), Lifetime: core.LifetimeNextInput},
		core.CleanupEntry{Session: sess.ID, Ref: ref("old-due"), Lifetime: core.LifetimeNextNotice, Due: true}))
	must(t, s.SetCursor(ctx, "create\x00fake\x00old", idAt(t0)))
	must(t, s.SetCursor(ctx, "telegram.offset", "123"))
	// Not a reservation, though its value looks like an old id.
	must(t, s.SetCursor(ctx, "other", idAt(t0)))
	journaled, err := s.AppendEvents(ctx, core.Event{Kind: core.EventAssistant, Session: sess.ID, Text: "undelivered"})
	must(t, err)

	// Twenty days later, newer records of each kind.
	clk.Set(t0.Add(20 * 24 * time.Hour))
	newMsg := appendKeyed("fake\x00new", "new").Message
	must(t, s.AddCleanup(ctx, core.CleanupEntry{Session: sess.ID, Ref: ref("new"), Lifetime: core.LifetimeNextInput}))
	must(t, s.SetCursor(ctx, "create\x00fake\x00new", idAt(clk.Now())))
	appendEvents(t, s, 50) // the event log trims past the journaled event

	// Retention ten days: everything made at t0 is older.
	st, err := s.Prune(ctx, PruneOptions{Before: clk.Now().Add(-10 * 24 * time.Hour),
		CursorPrefixes: []string{"create\x00"}, Batch: 3})
	must(t, err)
	if want := (PruneStats{Dedup: 10, Cursors: 1, Ledger: 2}); st != want {
		t.Errorf("Prune = %+v, want %+v", st, want)
	}

	// A redelivery within the retention is still recognised.
	if res := appendKeyed("fake\x00new", "new"); !res.Duplicate || res.Message.ID != newMsg.ID {
		t.Errorf("redelivery of a kept key = %+v, want the duplicate of %s", res, newMsg.ID)
	}
	if _, ok, err := s.Deduped(ctx, "fake\x00new"); err != nil || !ok {
		t.Errorf("Deduped(new) = %v, %v", ok, err)
	}
	if _, ok, err := s.Deduped(ctx, "fake\x00old-3"); err != nil || ok {
		t.Errorf("Deduped(old-3) = %v, %v; want pruned", ok, err)
	}
	rows, err := s.Cleanup(ctx, "")
	must(t, err)
	if len(rows) != 1 || rows[0].Ref != ref("new") {
		t.Errorf("ledger after prune = %+v, want only the new row", rows)
	}
	for name, want := range map[string]bool{
		"create\x00fake\x00old": false, "create\x00fake\x00new": true, "telegram.offset": true, "other": true,
	} {
		v, err := s.Cursor(ctx, name)
		must(t, err)
		if (v != "") != want {
			t.Errorf("cursor %q = %q after prune, want kept %v", name, v, want)
		}
	}
	// Messages and the journal are never pruned.
	msgs, err := s.Inbox(ctx, sess.ID, "", 0)
	must(t, err)
	if len(msgs) != 11 || msgs[0].ID != oldMsgs[0].ID {
		t.Errorf("inbox after prune holds %d messages, want all 11", len(msgs))
	}
	ds, err := s.Deliveries(ctx, 0, 0)
	must(t, err)
	if len(ds) != 1 || ds[0].Event.Seq != journaled[0].Seq {
		t.Errorf("journal after prune = %+v, want the undelivered event", ds)
	}

	// Nothing left to prune: a second run removes nothing.
	if st, err := s.Prune(ctx, PruneOptions{Before: clk.Now().Add(-10 * 24 * time.Hour),
		CursorPrefixes: []string{"create\x00"}}); err != nil || st != (PruneStats{}) {
		t.Errorf("second Prune = %+v, %v; want nothing", st, err)
	}
}

func TestPruneStopsWithContext(t *testing.T) {
	s, _ := openTemp(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Prune(ctx, PruneOptions{Before: time.Now()}); err == nil {
		t.Fatal("Prune with a done context succeeded")
	}
}

func TestIDMillis(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 123e6, time.UTC)
	if ms, ok := idMillis([]byte(idAt(at))); !ok || ms != at.UnixMilli() {
		t.Errorf("idMillis(session id) = %d, %v; want %d", ms, ok, at.UnixMilli())
	}
	for _, bad := range []string{"", "123", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01arz3ndektsv4rrffq69g5fav"} {
		if _, ok := idMillis([]byte(bad)); ok {
			t.Errorf("idMillis(%q) accepted", bad)
		}
	}
}

// idAt is a time-ordered id of time at. core.NewSessionID would not do: it
// never goes back in time within a process, and other tests' clocks ran ahead.
func idAt(at time.Time) string { return core.EncodeID(uint64(at.UnixMilli()), [10]byte{1}) }

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
