package bolt

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// Paging leaves the session cache as it was: listing every session must not
// keep every session decoded. (What pages hold is storetest's.)
func TestSessionsPageLeavesCacheAlone(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for i := range 25 {
		id := core.SessionID(idAt(t0.Add(time.Duration(i) * time.Minute)))
		createSession(t, s, core.Session{ID: id, Title: "s", Output: "a long output"})
	}
	q := core.SessionQuery{Limit: 10}
	n := 0
	for {
		page, next, err := s.SessionsPage(ctx, q)
		must(t, err)
		n += len(page)
		if next == "" {
			break
		}
		q.After = next
	}
	if n != 25 {
		t.Errorf("paged through %d sessions, want 25", n)
	}
	if n := s.cache.len(); n != 0 {
		t.Errorf("the session cache holds %d sessions after paging, want 0", n)
	}
}

func TestStoredStatus(t *testing.T) {
	tests := []struct {
		raw  string
		want core.Status
		ok   bool
	}{
		{`{"id":"x","title":"a \"status\":\"closed\"","status":"idle","output":"…"}`, core.StatusIdle, true},
		{`{"title":{"nested":["status"]},"status":"working"}`, core.StatusWorking, true},
		{`{"id":"x"}`, "", true},
		{`{"id":"x","title":"ends in a backslash \\","status":"waiting"}`, core.StatusWaiting, true},
		{`{"id":"x","title":"\u0022","status":"closed"}`, core.StatusClosed, true},
		{`{"title":"t","id":"x","status":"closed"}`, core.StatusClosed, true},
		{`{"id":"x","title":"t","status":"\u0063losed"}`, core.StatusClosed, true},
		{`[1]`, "", false},
		{`{"status":`, "", false},
	}
	// Whatever the title, a session as the store writes it reads back its
	// status.
	for _, title := range []string{"", `"`, `\`, `\"`, `","status":"closed`, "naïve \x00 \u2028", `\u0022`} {
		raw, err := json.Marshal(core.Session{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV", Title: title, Status: core.StatusWorking})
		if err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			raw  string
			want core.Status
			ok   bool
		}{string(raw), core.StatusWorking, true})
	}
	for _, tt := range tests {
		got, err := storedStatus([]byte(tt.raw))
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("storedStatus(%s) = %q, %v; want %q, ok %v", tt.raw, got, err, tt.want, tt.ok)
		}
	}
}
