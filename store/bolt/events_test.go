package bolt

import (
	"context"
	"errors"
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
