package bolt

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/parley-chat/parley/core"
)

func journalSeqs(tb testing.TB, s *Store, after uint64, limit int) []uint64 {
	tb.Helper()
	ds, err := s.Deliveries(context.Background(), after, limit)
	if err != nil {
		tb.Fatalf("Deliveries: %v", err)
	}
	var out []uint64
	for _, d := range ds {
		out = append(out, d.Event.Seq)
	}
	return out
}

// TestJournalKeepsWhatCannotBeDerived: the events Event.Journaled selects
// are journaled in the transaction that logs them; the others are not.
func TestJournalKeepsWhatCannotBeDerived(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	createSession(t, s, core.Session{ID: "s", Title: "journal"})
	msg := func(text string) *core.Message { return &core.Message{Role: core.RoleSystem, Content: text} }
	evs, err := s.AppendEvents(ctx,
		core.Event{Kind: core.EventOutput, Session: "s", Text: "streaming"},
		core.Event{Kind: core.EventOutput, Session: "s", Text: "final", Final: true},
		core.Event{Kind: core.EventNotice, Session: "s", Message: msg("notice")},
		core.Event{Kind: core.EventSessionUpdated, Session: "s", Status: core.StatusWorking},
		core.Event{Kind: core.EventTurnComplete, Session: "s"},
	)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Append(ctx, core.Append{
		Message: core.Message{Session: "s", Role: core.RoleAssistant, Content: "hello"},
		Events:  []core.Event{{Kind: core.EventAssistant, Message: &core.Message{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{evs[1].Seq, evs[2].Seq, evs[4].Seq, res.Events[0].Seq}
	if got := journalSeqs(t, s, 0, 0); !slices.Equal(got, want) {
		t.Fatalf("journaled seqs %v, want %v", got, want)
	}
	ds, _ := s.Deliveries(ctx, res.Events[0].Seq-1, 0)
	if len(ds) != 1 || ds[0].Event.Message == nil || ds[0].Event.Message.Content != "hello" || ds[0].Event.Session != "s" {
		t.Fatalf("assistant delivery %+v: want its inbox message resolved", ds)
	}
	if got := journalSeqs(t, s, evs[1].Seq, 2); !slices.Equal(got, want[1:3]) {
		t.Errorf("page after %d limit 2 = %v, want %v", evs[1].Seq, got, want[1:3])
	}
}

// TestConfirmDelivery: operations are confirmed one by one and the last
// confirmation takes the event out of the journal, across a reopen.
func TestConfirmDelivery(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, Options{})
	evs, err := s.AppendEvents(ctx,
		core.Event{Kind: core.EventTurnComplete, Session: "a"},
		core.Event{Kind: core.EventTurnComplete, Session: "b"},
	)
	if err != nil {
		t.Fatal(err)
	}
	seq := evs[0].Seq
	for _, k := range []string{"telegram/msg/0", "slack/msg/0"} {
		if err := s.ConfirmDelivery(ctx, seq, k, false); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s = openAt(t, path, Options{NoSync: true})
	ds, _ := s.Deliveries(ctx, 0, 0)
	if len(ds) != 2 || fmt.Sprint(ds[0].Done) != "[slack/msg/0 telegram/msg/0]" || len(ds[1].Done) != 0 {
		t.Fatalf("after reopen: %+v, want the first event's two confirmations kept", ds)
	}
	if err := s.ConfirmDelivery(ctx, seq, "web/msg/0", true); err != nil {
		t.Fatal(err)
	}
	if got := journalSeqs(t, s, 0, 0); !slices.Equal(got, []uint64{evs[1].Seq}) {
		t.Fatalf("journal %v after the last confirmation, want only %d", got, evs[1].Seq)
	}
	ds, _ = s.Deliveries(ctx, 0, 0)
	if len(ds[0].Done) != 0 {
		t.Errorf("confirmations of the finished event leaked into the next: %v", ds[0].Done)
	}
	// Confirming what is no longer journaled is no error and writes nothing.
	if err := s.ConfirmDelivery(ctx, seq, "late", false); err != nil {
		t.Errorf("late confirmation: %v", err)
	}
	if ds, _ := s.Deliveries(ctx, 0, 0); len(ds) != 1 || len(ds[0].Done) != 0 {
		t.Errorf("late confirmation changed the journal: %+v", ds)
	}
}

// TestJournalOutlivesEventLogTrim: an outage may outlast many events; the
// journal keeps its own copy while the bounded log is trimmed.
func TestJournalOutlivesEventLogTrim(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{MaxEvents: 10})
	first, err := s.AppendEvents(ctx, core.Event{Kind: core.EventTurnComplete, Session: "s"})
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, s, 100)
	if _, err := s.EventsSince(ctx, 0, 0); err == nil {
		t.Fatal("the event log was not trimmed; the test proves nothing")
	}
	ds, err := s.Deliveries(ctx, 0, 0)
	if err != nil || len(ds) != 1 || ds[0].Event.Seq != first[0].Seq || ds[0].Event.Kind != core.EventTurnComplete {
		t.Fatalf("Deliveries = %+v, %v; want the first event still journaled", ds, err)
	}
}
