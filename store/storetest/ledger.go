package storetest

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

func testLedger(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, again := e.Open(t, Options{Now: clk.Now})
	t0 := clk.Now()
	ref := func(adapter core.AdapterName, chat, thread, id string) core.MessageRef {
		return core.MessageRef{Adapter: adapter, Place: core.Place{Chat: chat, Thread: thread}, ID: id}
	}
	r1 := ref("telegram", "-100", "7", "1")
	r2 := ref("telegram", "-100", "7", "2")
	r3 := ref("slack", "C1", "17.1", "17.2")
	r4 := ref("telegram", "-100", "71", "x") // never added
	// Would be r1's key if the parts were simply concatenated.
	r5 := ref("telegram", "-10", "07", "1")

	steps := []struct {
		name    string
		add     []core.CleanupEntry
		remove  []core.MessageRef
		session core.SessionID
		want    []core.CleanupEntry
	}{
		{
			name: "add, listed oldest first",
			add: []core.CleanupEntry{
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
				{Session: "a", Ref: r1, Lifetime: core.LifetimeNextInput, Others: true, Created: t0.Add(time.Second)},
				{Session: "b", Ref: r3, Lifetime: core.LifetimeTurnComplete},
				{Session: "b", Ref: r5, Lifetime: core.LifetimeNextNotice, Created: t0.Add(3 * time.Second)},
			},
			session: "a",
			want: []core.CleanupEntry{
				{Session: "a", Ref: r1, Lifetime: core.LifetimeNextInput, Others: true, Created: t0.Add(time.Second)},
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
			},
		},
		{
			name:    "all sessions",
			session: "",
			want: []core.CleanupEntry{
				{Session: "b", Ref: r3, Lifetime: core.LifetimeTurnComplete, Created: t0},
				{Session: "a", Ref: r1, Lifetime: core.LifetimeNextInput, Others: true, Created: t0.Add(time.Second)},
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
				{Session: "b", Ref: r5, Lifetime: core.LifetimeNextNotice, Created: t0.Add(3 * time.Second)},
			},
		},
		{
			name:    "replace the row of a ref",
			add:     []core.CleanupEntry{{Session: "a", Ref: r1, Lifetime: core.LifetimeTurnComplete, Created: t0.Add(5 * time.Second)}},
			session: "a",
			want: []core.CleanupEntry{
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
				{Session: "a", Ref: r1, Lifetime: core.LifetimeTurnComplete, Created: t0.Add(5 * time.Second)},
			},
		},
		{
			name:    "remove, missing rows are no error",
			remove:  []core.MessageRef{r2, r4, ref("matrix", "!room", "", "$ev")},
			session: "a",
			want: []core.CleanupEntry{
				{Session: "a", Ref: r1, Lifetime: core.LifetimeTurnComplete, Created: t0.Add(5 * time.Second)},
			},
		},
		{
			name:    "unknown session",
			session: "c",
			want:    []core.CleanupEntry{},
		},
	}
	for _, st := range steps {
		if err := s.AddCleanup(ctx, st.add...); err != nil {
			t.Fatalf("%s: AddCleanup: %v", st.name, err)
		}
		if err := s.RemoveCleanup(ctx, st.remove...); err != nil {
			t.Fatalf("%s: RemoveCleanup: %v", st.name, err)
		}
		got, err := s.Cleanup(ctx, st.session)
		if err != nil {
			t.Fatalf("%s: Cleanup: %v", st.name, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: Cleanup(%q) =\n%+v\nwant\n%+v", st.name, st.session, got, st.want)
		}
	}

	if err := s.AddCleanup(ctx, core.CleanupEntry{Session: "a"}); err == nil {
		t.Errorf("AddCleanup of a row without a message id succeeded")
	}

	// Rows survive a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = again(t, Options{})
	if got, err := s.Cleanup(ctx, "b"); err != nil || len(got) != 2 {
		t.Errorf("after reopen Cleanup(b) = %+v, %v", got, err)
	}
}

func testLedgerBySession(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})
	ref := func(id string) core.MessageRef {
		return core.MessageRef{Adapter: "fake", Place: core.Place{Chat: "c"}, ID: id}
	}
	bySession := func(session core.SessionID, want ...string) {
		t.Helper()
		rows, err := s.Cleanup(ctx, session)
		Must(t, err)
		if got := refs(rows); !slices.Equal(got, want) {
			t.Errorf("Cleanup(%s) = %q, want %q", session, got, want)
		}
	}
	Must(t, s.AddCleanup(ctx,
		core.CleanupEntry{Session: "a", Ref: ref("1"), Lifetime: core.LifetimeNextInput},
		core.CleanupEntry{Session: "a", Ref: ref("2"), Lifetime: core.LifetimeNextNotice},
		core.CleanupEntry{Session: "b", Ref: ref("3"), Lifetime: core.LifetimeNextNotice}))
	bySession("a", "1", "2")
	bySession("b", "3")

	// A row replaced under another session moves in the index.
	Must(t, s.AddCleanup(ctx, core.CleanupEntry{Session: "b", Ref: ref("2"), Lifetime: core.LifetimeTurnComplete}))
	bySession("a", "1")
	bySession("b", "2", "3")

	// Rows appended with a message are indexed too.
	sess := CreateSession(t, s, core.Session{Title: "c"})
	_, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"},
		Cleanup: []core.CleanupEntry{{Ref: ref("4"), Lifetime: core.LifetimeNextInput}}})
	Must(t, err)
	bySession(sess.ID, "4")

	Must(t, s.RemoveCleanup(ctx, ref("3"), ref("nope")))
	bySession("b", "2")

	// Pruned rows leave the index.
	clk.Add(48 * time.Hour)
	Must(t, s.AddCleanup(ctx, core.CleanupEntry{Session: "a", Ref: ref("5"), Lifetime: core.LifetimeNextInput}))
	st, err := s.Prune(ctx, store.PruneOptions{Before: clk.Now().Add(-24 * time.Hour)})
	Must(t, err)
	if st.Ledger != 3 {
		t.Errorf("pruned %d rows, want 3", st.Ledger)
	}
	bySession("a", "5")
	bySession("b")
	bySession(sess.ID)
}

func testCursors(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	steps := []struct {
		set, name, value string
		want             string
	}{
		{name: "telegram", want: ""},
		{set: "telegram", value: "1001", name: "telegram", want: "1001"},
		{set: "telegram", value: "1002", name: "telegram", want: "1002"},
		{set: "matrix", value: "s72_1", name: "telegram", want: "1002"},
		{name: "matrix", want: "s72_1"},
		{set: "matrix", value: "", name: "matrix", want: ""},
	}
	for _, st := range steps {
		if st.set != "" {
			if err := s.SetCursor(ctx, st.set, st.value); err != nil {
				t.Fatalf("SetCursor(%q, %q): %v", st.set, st.value, err)
			}
		}
		if got, err := s.Cursor(ctx, st.name); err != nil || got != st.want {
			t.Errorf("Cursor(%q) = %q, %v; want %q", st.name, got, err, st.want)
		}
	}
	if err := s.SetCursor(ctx, "", "x"); err == nil {
		t.Errorf("SetCursor with an empty name succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = again(t, Options{})
	if got, _ := s.Cursor(ctx, "telegram"); got != "1002" {
		t.Errorf("after reopen Cursor(telegram) = %q", got)
	}
}

func testPrune(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now, MaxEvents: 10})
	t0 := clk.Now()
	sess := CreateSession(t, s, core.Session{Title: "t"})

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
	Must(t, s.AddCleanup(ctx,
		core.CleanupEntry{Session: sess.ID, Ref: ref("old"), Lifetime: core.LifetimeNextInput},
		core.CleanupEntry{Session: sess.ID, Ref: ref("old-due"), Lifetime: core.LifetimeNextNotice, Due: true}))
	Must(t, s.SetCursor(ctx, "create\x00fake\x00old", IDAt(t0)))
	Must(t, s.SetCursor(ctx, "telegram.offset", "123"))
	// Not a reservation, though its value looks like an old id.
	Must(t, s.SetCursor(ctx, "other", IDAt(t0)))
	journaled, err := s.AppendEvents(ctx, core.Event{Kind: core.EventAssistant, Session: sess.ID, Text: "undelivered"})
	Must(t, err)

	// Twenty days later, newer records of each kind.
	clk.Set(t0.Add(20 * 24 * time.Hour))
	newMsg := appendKeyed("fake\x00new", "new").Message
	Must(t, s.AddCleanup(ctx, core.CleanupEntry{Session: sess.ID, Ref: ref("new"), Lifetime: core.LifetimeNextInput}))
	Must(t, s.SetCursor(ctx, "create\x00fake\x00new", IDAt(clk.Now())))
	appendEvents(t, s, 50) // the event log trims past the journaled event

	// Retention ten days: everything made at t0 is older.
	st, err := s.Prune(ctx, store.PruneOptions{Before: clk.Now().Add(-10 * 24 * time.Hour),
		CursorPrefixes: []string{"create\x00"}, Batch: 3})
	Must(t, err)
	if want := (store.PruneStats{Dedup: 10, Cursors: 1, Ledger: 2}); st != want {
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
	Must(t, err)
	if len(rows) != 1 || rows[0].Ref != ref("new") {
		t.Errorf("ledger after prune = %+v, want only the new row", rows)
	}
	for name, want := range map[string]bool{
		"create\x00fake\x00old": false, "create\x00fake\x00new": true, "telegram.offset": true, "other": true,
	} {
		v, err := s.Cursor(ctx, name)
		Must(t, err)
		if (v != "") != want {
			t.Errorf("cursor %q = %q after prune, want kept %v", name, v, want)
		}
	}
	// Messages and the journal are never pruned.
	msgs, err := s.Inbox(ctx, sess.ID, "", 0)
	Must(t, err)
	if len(msgs) != 11 || msgs[0].ID != oldMsgs[0].ID {
		t.Errorf("inbox after prune holds %d messages, want all 11", len(msgs))
	}
	ds, err := s.Deliveries(ctx, 0, 0)
	Must(t, err)
	if len(ds) != 1 || ds[0].Event.Seq != journaled[0].Seq {
		t.Errorf("journal after prune = %+v, want the undelivered event", ds)
	}

	// Nothing left to prune: a second run removes nothing.
	if st, err := s.Prune(ctx, store.PruneOptions{Before: clk.Now().Add(-10 * 24 * time.Hour),
		CursorPrefixes: []string{"create\x00"}}); err != nil || st != (store.PruneStats{}) {
		t.Errorf("second Prune = %+v, %v; want nothing", st, err)
	}
}

func testPruneStopsWithContext(t *testing.T, e Engine) {
	s, _ := e.Open(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Prune(ctx, store.PruneOptions{Before: time.Now()}); err == nil {
		t.Fatal("Prune with a done context succeeded")
	}
}

func refs(rows []core.CleanupEntry) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Ref.ID
	}
	return out
}
