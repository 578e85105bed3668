package bolt

import (
	"context"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
)

// InboxTail agrees with reading everything forward and keeping the end, for
// all sessions and for one, before and after the recent entries are folded.
func TestInboxTail(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	ctx := context.Background()
	a := createSession(t, s, core.Session{Title: "a"}).ID
	b := createSession(t, s, core.Session{Title: "b"}).ID
	check := func(stage string) {
		t.Helper()
		for _, scope := range []core.SessionID{"", a, b} {
			all, err := s.Inbox(ctx, scope, "", 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []int{0, 1, 7, 100, 5000} {
				tail, err := s.InboxTail(ctx, scope, n)
				if err != nil {
					t.Fatal(err)
				}
				want := all[max(0, len(all)-n):]
				if n == 0 {
					want = nil
				}
				if fmt.Sprint(ids(tail)) != fmt.Sprint(ids(want)) {
					t.Fatalf("%s: InboxTail(%q, %d) = %d messages %v…, want %d", stage, scope, n, len(tail), first(ids(tail)), len(want))
				}
			}
		}
	}
	check("empty")
	for i := range 2500 { // more than one fold of inbox_recent
		sid := a
		if i%3 == 0 {
			sid = b
		}
		if _, err := s.Append(ctx, core.Append{Message: core.Message{Session: sid, Content: fmt.Sprint(i)}}); err != nil {
			t.Fatal(err)
		}
		if i == 10 || i == 1500 {
			check(fmt.Sprintf("after %d appends", i+1))
		}
	}
	check("after 2500 appends")
}

func first(ids []core.MessageID) []core.MessageID { return ids[:min(len(ids), 3)] }
