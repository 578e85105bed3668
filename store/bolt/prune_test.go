package bolt

import (
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestIDMillis(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 0, 123e6, time.UTC)
	if ms, ok := core.IDMillis(idAt(at)); !ok || ms != at.UnixMilli() {
		t.Errorf("IDMillis(session id) = %d, %v; want %d", ms, ok, at.UnixMilli())
	}
	for _, bad := range []string{"", "123", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01arz3ndektsv4rrffq69g5fav"} {
		if _, ok := core.IDMillis(bad); ok {
			t.Errorf("IDMillis(%q) accepted", bad)
		}
	}
}

// idAt is the time-ordered id of time at, the same for the same time.
func idAt(at time.Time) string { return core.EncodeID(uint64(at.UnixMilli()), [10]byte{1}) }

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}
