package bolt

import (
	"context"
	"errors"
	"reflect"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

func appendEvents(tb testing.TB, s *Store, n int) []core.Event {
	tb.Helper()
	evs := make([]core.Event, n)
	for i := range evs {
		evs[i] = core.Event{Kind: core.EventOutput, Session: "s", Text: "out"}
	}
	got, err := s.AppendEvents(context.Background(), evs...)
	if err != nil {
		tb.Fatalf("AppendEvents: %v", err)
	}
	return got
}

func TestEventSeq(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})
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

func TestEventLogBounded(t *testing.T) {
	ctx := context.Background()
	const max = 80 // slack is max/8+1 = 11
	s, path := openTemp(t, Options{MaxEvents: max})
	count := func() int {
		n := 0
		_ = s.db.View(func(tx *bbolt.Tx) error {
			n = tx.Bucket(bucketEvents).Stats().KeyN
			return nil
		})
		return n
	}
	for i := 1; i <= 300; i++ {
		appendEvents(t, s, 1)
		if n := count(); n < min(i, max) || n > max+int(s.slack) {
			t.Fatalf("after %d events the log holds %d, want %d..%d", i, n, min(i, max), max+s.slack)
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
	s = openAt(t, path, Options{MaxEvents: max, NoSync: true})
	if got := appendEvents(t, s, 1); got[0].Seq != last+1 {
		t.Errorf("seq after reopen = %d, want %d", got[0].Seq, last+1)
	}
}
