package bolt

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestSessionsPage(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// 25 sessions a minute apart; every third closed. Created is set
	// against the id order for some, to show pages follow ids.
	var all []core.SessionID // oldest first
	closed := map[core.SessionID]bool{}
	for i := range 25 {
		id := core.SessionID(idAt(t0.Add(time.Duration(i) * time.Minute)))
		st := core.StatusIdle
		if i%3 == 0 {
			st = core.StatusClosed
			closed[id] = true
		}
		createSession(t, s, core.Session{ID: id, Title: "s", Status: st, Output: "a long output"})
		all = append(all, id)
	}
	newest := func(filter func(core.SessionID) bool) []core.SessionID {
		var out []core.SessionID
		for i := len(all) - 1; i >= 0; i-- {
			if filter == nil || filter(all[i]) {
				out = append(out, all[i])
			}
		}
		return out
	}
	// walk follows the cursors from the first page to the last.
	walk := func(q core.SessionQuery) (got []core.SessionID, pages int) {
		t.Helper()
		for {
			page, next, err := s.SessionsPage(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if q.Limit > 0 && len(page) > q.Limit {
				t.Fatalf("page of %d sessions, limit %d", len(page), q.Limit)
			}
			for _, ss := range page {
				got = append(got, ss.ID)
				if q.Status != "" && ss.Status != q.Status {
					t.Fatalf("session %s has status %s, filter %s", ss.ID, ss.Status, q.Status)
				}
			}
			if next == "" {
				return got, pages
			}
			if next != page[len(page)-1].ID {
				t.Fatalf("next = %s, want the page's last id %s", next, page[len(page)-1].ID)
			}
			q.After = next
		}
	}

	tests := []struct {
		name  string
		q     core.SessionQuery
		want  []core.SessionID
		pages int
	}{
		{"all at once", core.SessionQuery{}, newest(nil), 1},
		{"pages of 10", core.SessionQuery{Limit: 10}, newest(nil), 3},
		{"pages of 5, exactly full", core.SessionQuery{Limit: 5}, newest(nil), 5},
		{"closed, pages of 4", core.SessionQuery{Limit: 4, Status: core.StatusClosed},
			newest(func(id core.SessionID) bool { return closed[id] }), 3},
		{"idle", core.SessionQuery{Status: core.StatusIdle},
			newest(func(id core.SessionID) bool { return !closed[id] }), 1},
		{"no match", core.SessionQuery{Status: core.StatusWaiting, Limit: 3}, nil, 1},
		{"after a cursor", core.SessionQuery{After: all[5]}, newest(func(id core.SessionID) bool { return id < all[5] }), 1},
		{"after an id past the newest", core.SessionQuery{After: core.SessionID(idAt(t0.Add(time.Hour)))}, newest(nil), 1},
		{"after the oldest", core.SessionQuery{After: all[0], Limit: 3}, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, pages := walk(tt.q)
			if !reflect.DeepEqual(got, tt.want) || pages != tt.pages {
				t.Errorf("got %d sessions in %d pages, want %d in %d\n got %v\nwant %v", len(got), pages, len(tt.want), tt.pages, got, tt.want)
			}
		})
	}

	// Sessions come back whole, and paging leaves the session cache as it
	// was: listing every session must not keep every session decoded.
	page, _, err := s.SessionsPage(ctx, core.SessionQuery{Limit: 1})
	must(t, err)
	if len(page) != 1 || page[0].Output != "a long output" || page[0].Title != "s" {
		t.Errorf("page = %+v", page)
	}
	if n := s.cache.len(); n != 0 {
		t.Errorf("the session cache holds %d sessions after paging, want 0", n)
	}
}

func TestSessionsPageStreaming(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	var ids []core.SessionID
	for i := range 10 {
		ids = append(ids, createSession(t, s, core.Session{ID: core.SessionID(idAt(time.Unix(int64(i), 0))), Title: "s"}).ID)
	}
	// Streaming lists the sessions with a live output not yet final,
	// whatever their titles or their bindings' metadata hold.
	must(t, func() error {
		_, _, err := s.UpdateSession(ctx, ids[3], func(ss *core.Session) error { ss.Output = "half"; return nil })
		return err
	}())
	must(t, func() error {
		_, _, err := s.UpdateSession(ctx, ids[4], func(ss *core.Session) error {
			ss.Output, ss.OutputFinal = "done", true
			return nil
		})
		return err
	}())
	must(t, func() error {
		_, _, err := s.UpdateSession(ctx, ids[7], func(ss *core.Session) error {
			ss.Title = `"output":"`
			ss.Bindings = map[core.AdapterName]core.Binding{"fake": {Adapter: "fake",
				Place: core.Place{Chat: "c"}, Meta: []byte(`{"output":"not the session's"}`)}}
			return nil
		})
		return err
	}())
	for _, limit := range []int{0, 1} {
		got, next, err := s.SessionsPage(ctx, core.SessionQuery{Streaming: true, Limit: limit})
		must(t, err)
		if len(got) != 1 || got[0].ID != ids[3] || next != "" {
			t.Errorf("Streaming, limit %d: %d sessions (next %q), want only %s", limit, len(got), next, ids[3])
		}
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
