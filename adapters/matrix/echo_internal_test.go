package matrix

import (
	"fmt"
	"slices"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func own(txn string, ev id.EventID) *event.Event {
	return &event.Event{ID: ev, Unsigned: event.Unsigned{TransactionID: txn}}
}

// TestEchoesBounded: the oldest transaction ids are forgotten beyond
// echoCap; the recent ones are still known.
func TestEchoesBounded(t *testing.T) {
	e := newEchoes()
	for i := range echoCap + 10 {
		e.saw("!r", own(fmt.Sprint("t", i), id.EventID(fmt.Sprint("$e", i))))
	}
	if len(e.m) != echoCap || len(e.order) != echoCap {
		t.Fatalf("%d ids remembered (%d in order), want %d", len(e.m), len(e.order), echoCap)
	}
	if _, ok := e.begin("t0", "!r"); ok {
		t.Error("the oldest id is still known")
	}
	if ev, ok := e.begin(fmt.Sprint("t", echoCap+9), "!r"); !ok || ev != id.EventID(fmt.Sprint("$e", echoCap+9)) {
		t.Errorf("the newest id: %q %v, want its event", ev, ok)
	}
}

// TestEchoesKeepWhatTheSendReturned: of two events under one transaction
// id, the one the send returned stays, whichever the sync showed first;
// nothing is decided while the send is in flight, and nothing twice.
func TestEchoesKeepWhatTheSendReturned(t *testing.T) {
	e := newEchoes()
	if _, ok := e.begin("t", "!r"); ok {
		t.Fatal("an unseen id was taken as sent")
	}
	if d := e.saw("!r", own("t", "$a")); d != nil {
		t.Errorf("one copy: redact %v", d)
	}
	if d := e.saw("!r", own("t", "$b")); d != nil {
		t.Errorf("decided %v while the send is in flight", d)
	}
	if d := e.end("t", "!r", "$b"); !slices.Equal(d, []id.EventID{"$a"}) {
		t.Errorf("redact %v, want [$a]", d)
	}
	if d := e.saw("!r", own("t", "$a")); d != nil {
		t.Errorf("seen again: redact %v again", d)
	}
	// Without a send of this process, the first shown stays.
	if d := e.saw("!r", own("u", "$c")); d != nil {
		t.Error(d)
	}
	if d := e.saw("!r", own("u", "$d")); !slices.Equal(d, []id.EventID{"$d"}) {
		t.Errorf("redact %v, want [$d]", d)
	}
	if ev, ok := e.begin("u", "!r"); !ok || ev != "$c" {
		t.Errorf("replay of a seen id: %q %v, want $c", ev, ok)
	}
}
