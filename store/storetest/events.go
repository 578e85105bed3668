package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/parley-chat/parley/core"
)

func testEventSeq(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})
	if last, err := s.LastEventSeq(ctx); err != nil || last != 0 {
		t.Fatalf("LastEventSeq of an empty log = %d, %v", last, err)
	}
	if evs, err := s.EventsSince(ctx, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("EventsSince of an empty log = %+v, %v", evs, err)
	}
	notice := core.Message{Role: core.RoleSystem, Content: "🎤 Transcribing…"}
	got, err := s.AppendEvents(ctx,
		core.Event{Kind: core.EventOutput, Session: "s", Text: "a"},
		core.Event{Kind: core.EventNotice, Session: "s", Message: &notice, Options: []string{"x"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	notice.Content = "changed after the call"
	if len(got) != 2 || got[0].Seq != 1 || got[1].Seq != 2 || !got[0].Time.Equal(clk.Now()) {
		t.Fatalf("AppendEvents = %+v", got)
	}
	got = append(got, appendEvents(t, s, 3)...)
	for i, e := range got {
		if e.Seq != uint64(i+1) {
			t.Errorf("event %d has seq %d", i, e.Seq)
		}
	}
	if last, _ := s.LastEventSeq(ctx); last != 5 {
		t.Errorf("LastEventSeq = %d, want 5", last)
	}
	stored, err := s.EventsSince(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, got) {
		t.Errorf("stored %+v\nreturned %+v", stored, got)
	}
	if stored[1].Message == nil || stored[1].Message.Content != "🎤 Transcribing…" {
		t.Errorf("inline message = %+v", stored[1].Message)
	}

	tests := []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 2, []uint64{1, 2}},
		{2, 0, []uint64{3, 4, 5}},
		{3, 1, []uint64{4}},
		{5, 0, nil},
		{9, 0, nil},
	}
	for _, tt := range tests {
		evs, err := s.EventsSince(ctx, tt.after, tt.limit)
		if err != nil {
			t.Errorf("EventsSince(%d, %d): %v", tt.after, tt.limit, err)
			continue
		}
		var seqs []uint64
		for _, e := range evs {
			seqs = append(seqs, e.Seq)
		}
		if !reflect.DeepEqual(seqs, tt.want) {
			t.Errorf("EventsSince(%d, %d) = %v, want %v", tt.after, tt.limit, seqs, tt.want)
		}
	}
}

func testEventLogBounded(t *testing.T, e Engine) {
	ctx := context.Background()
	const max, slack = 80, 80/8 + 1
	s, again := e.Open(t, Options{MaxEvents: max})
	count := func() int { return keptEvents(t, s) }
	for i := 1; i <= 300; i++ {
		appendEvents(t, s, 1)
		if n := count(); n < min(i, max) || n > max+slack {
			t.Fatalf("after %d events the log holds %d, want %d..%d", i, n, min(i, max), max+slack)
		}
	}
	// One big append trims in its own transaction.
	appendEvents(t, s, 3*max)
	if n := count(); n != max {
		t.Errorf("after a large append the log holds %d, want %d", n, max)
	}
	last, _ := s.LastEventSeq(ctx)
	if last != 300+3*max {
		t.Errorf("LastEventSeq = %d", last)
	}
	oldest := last - max + 1

	tests := []struct {
		name      string
		after     uint64
		truncated bool
		first     uint64
	}{
		{"from the start", 0, true, 0},
		{"one too old", oldest - 2, true, 0},
		{"just the oldest kept", oldest - 1, false, oldest},
		{"inside", last - 5, false, last - 4},
		{"at the end", last, false, 0},
		{"past the end", last + 10, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := s.EventsSince(ctx, tt.after, 0)
			if tt.truncated {
				if !errors.Is(err, core.ErrEventsTruncated) || evs != nil {
					t.Errorf("EventsSince(%d) = %d events, %v; want ErrEventsTruncated", tt.after, len(evs), err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.first == 0 {
				if len(evs) != 0 {
					t.Errorf("EventsSince(%d) = %d events, want none", tt.after, len(evs))
				}
				return
			}
			if len(evs) == 0 || evs[0].Seq != tt.first || evs[len(evs)-1].Seq != last {
				t.Errorf("EventsSince(%d) = %d events from %d", tt.after, len(evs), evs[0].Seq)
			}
		})
	}

	// The bound and the sequence survive a reopen.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = again(t, Options{MaxEvents: max})
	if got := appendEvents(t, s, 1); got[0].Seq != last+1 {
		t.Errorf("seq after reopen = %d, want %d", got[0].Seq, last+1)
	}
}

// testJournalKeepsWhatCannotBeDerived: the events Event.Journaled selects
// are journaled in the transaction that logs them; the others are not.
func testJournalKeepsWhatCannotBeDerived(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	CreateSession(t, s, core.Session{ID: "s", Title: "journal"})
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

// testConfirmDelivery: operations are confirmed one by one and the last
// confirmation takes the event out of the journal, across a reopen.
func testConfirmDelivery(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
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
	s = again(t, Options{})
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

// testJournalOutlivesEventLogTrim: an outage may outlast many events; the
// journal keeps its own copy while the bounded log is trimmed.
func testJournalOutlivesEventLogTrim(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{MaxEvents: 10})
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

// keptEvents is how many events the log of s holds, found through
// EventsSince alone: the oldest kept event is the first one it can return
// without core.ErrEventsTruncated.
func keptEvents(tb testing.TB, s core.Store) int {
	tb.Helper()
	ctx := context.Background()
	last, err := s.LastEventSeq(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	// EventsSince(after) is truncated for every after below oldest-1 and
	// for none from there.
	lo, hi := uint64(0), last // the answer, oldest-1, lies in [lo, hi]
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, err := s.EventsSince(ctx, mid, 1)
		switch {
		case errors.Is(err, core.ErrEventsTruncated):
			lo = mid + 1
		case err != nil:
			tb.Fatal(err)
		default:
			hi = mid
		}
	}
	return int(last - lo)
}

func journalSeqs(tb testing.TB, s core.Store, after uint64, limit int) []uint64 {
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
