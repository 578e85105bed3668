package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func testCreateSession(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})

	got, evs, err := s.CreateSession(ctx, core.Session{Title: "first"},
		core.Event{Kind: core.EventSessionCreated, Title: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID == "" || !got.Created.Equal(clk.Now()) || !got.Updated.Equal(clk.Now()) || got.Status != core.StatusIdle {
		t.Errorf("defaults not filled: %+v", got)
	}
	if len(evs) != 1 || evs[0].Seq != 1 || evs[0].Session != got.ID || !evs[0].Time.Equal(clk.Now()) {
		t.Errorf("events = %+v", evs)
	}
	if _, _, err := s.CreateSession(ctx, core.Session{ID: got.ID}); !errors.Is(err, core.ErrExists) {
		t.Errorf("second CreateSession: err = %v, want ErrExists", err)
	}
	if last, _ := s.LastEventSeq(ctx); last != 1 {
		t.Errorf("refused CreateSession wrote events: last seq %d", last)
	}
	stored, err := s.Session(ctx, got.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stored, got) {
		t.Errorf("stored %+v, returned %+v", stored, got)
	}
	if _, err := s.Session(ctx, "nope"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("Session(nope): err = %v, want ErrNotFound", err)
	}
}

func testSessionsOldestFirst(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})
	var want []core.SessionID
	for range 5 {
		want = append(want, CreateSession(t, s, core.Session{}).ID)
		clk.Add(time.Second)
	}
	all, err := s.Sessions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []core.SessionID
	for _, sess := range all {
		got = append(got, sess.ID)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sessions = %v, want %v", got, want)
	}
}

func testPlaceIndexFollowsBindings(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	tg, sl := core.AdapterName("telegram"), core.AdapterName("slack")
	a := CreateSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{
		tg: Bind(tg, "-100", "7"),
	}})
	b := CreateSession(t, s, core.Session{})

	type lookup struct {
		adapter core.AdapterName
		place   core.Place
		want    core.SessionID // "" means not found
	}
	steps := []struct {
		name    string
		session core.SessionID
		change  func(*core.Session)
		append  bool // change through Append.Update instead of UpdateSession
		lookups []lookup
	}{
		{
			name: "created bound",
			lookups: []lookup{
				{tg, core.Place{Chat: "-100", Thread: "7"}, a.ID},
				{tg, core.Place{Chat: "-100"}, ""},
				{sl, core.Place{Chat: "-100", Thread: "7"}, ""},
			},
		},
		{
			name:    "add a binding",
			session: a.ID,
			change: func(s *core.Session) {
				s.Bindings[sl] = Bind(sl, "C1", "1700000000.000100")
			},
			lookups: []lookup{
				{tg, core.Place{Chat: "-100", Thread: "7"}, a.ID},
				{sl, core.Place{Chat: "C1", Thread: "1700000000.000100"}, a.ID},
			},
		},
		{
			name:    "move a binding",
			session: a.ID,
			append:  true,
			change: func(s *core.Session) {
				s.Bindings[tg] = Bind(tg, "-100", "8")
			},
			lookups: []lookup{
				{tg, core.Place{Chat: "-100", Thread: "7"}, ""},
				{tg, core.Place{Chat: "-100", Thread: "8"}, a.ID},
			},
		},
		{
			name:    "another session takes the place over",
			session: b.ID,
			change: func(s *core.Session) {
				s.Bindings = map[core.AdapterName]core.Binding{tg: Bind(tg, "-100", "8")}
			},
			lookups: []lookup{{tg, core.Place{Chat: "-100", Thread: "8"}, b.ID}},
		},
		{
			name:    "the old owner leaving does not unbind the new one",
			session: a.ID,
			change:  func(s *core.Session) { delete(s.Bindings, tg) },
			lookups: []lookup{{tg, core.Place{Chat: "-100", Thread: "8"}, b.ID}},
		},
		{
			name:    "remove a binding",
			session: a.ID,
			append:  true,
			change:  func(s *core.Session) { delete(s.Bindings, sl) },
			lookups: []lookup{{sl, core.Place{Chat: "C1", Thread: "1700000000.000100"}, ""}},
		},
		{
			name:    "a binding without a place is not indexed",
			session: a.ID,
			change:  func(s *core.Session) { s.Bindings = map[core.AdapterName]core.Binding{"web": {Adapter: "web"}} },
			lookups: []lookup{{"web", core.Place{}, ""}},
		},
	}
	for _, st := range steps {
		if st.change != nil {
			var err error
			if st.append {
				_, err = s.Append(ctx, core.Append{
					Message: core.Message{Session: st.session, Content: st.name},
					Update:  st.change,
				})
			} else {
				_, _, err = s.UpdateSession(ctx, st.session, func(s *core.Session) error {
					st.change(s)
					return nil
				})
			}
			if err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
		}
		for _, l := range st.lookups {
			got, err := s.SessionAt(ctx, l.adapter, l.place)
			switch {
			case l.want == "" && !errors.Is(err, core.ErrNotFound):
				t.Errorf("%s: SessionAt(%s, %+v) = %s, %v; want ErrNotFound", st.name, l.adapter, l.place, got.ID, err)
			case l.want != "" && (err != nil || got.ID != l.want):
				t.Errorf("%s: SessionAt(%s, %+v) = %s, %v; want %s", st.name, l.adapter, l.place, got.ID, err, l.want)
			}
		}
	}
}

func testPlaceKeysAreUnambiguous(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	// Concatenated without length prefixes these two would be one key.
	x := CreateSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{"m": Bind("m", "ab", "c")}})
	y := CreateSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{"m": Bind("m", "a", "bc")}})
	for _, c := range []struct {
		place core.Place
		want  core.SessionID
	}{{core.Place{Chat: "ab", Thread: "c"}, x.ID}, {core.Place{Chat: "a", Thread: "bc"}, y.ID}} {
		got, err := s.SessionAt(ctx, "m", c.place)
		if err != nil || got.ID != c.want {
			t.Errorf("SessionAt(%+v) = %s, %v; want %s", c.place, got.ID, err, c.want)
		}
	}
}

func testUpdateSession(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})
	orig := CreateSession(t, s, core.Session{Title: "t", Bindings: map[core.AdapterName]core.Binding{"x": Bind("x", "1", "")}})
	clk.Add(time.Minute)
	boom := errors.New("boom")

	tests := []struct {
		name      string
		id        core.SessionID
		fn        func(*core.Session) error
		wantErr   error
		wantTitle string
	}{
		{"fn error aborts", orig.ID, func(s *core.Session) error {
			s.Title = "changed"
			s.Bindings["y"] = Bind("y", "2", "")
			return boom
		}, boom, "t"},
		{"missing session", "nope", func(*core.Session) error { return nil }, core.ErrNotFound, "t"},
		{"applies", orig.ID, func(s *core.Session) error {
			s.Title = "renamed"
			s.ID = "cannot change"
			return nil
		}, nil, "renamed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, _ := s.LastEventSeq(ctx)
			got, evs, err := s.UpdateSession(ctx, tt.id, tt.fn, core.Event{Kind: core.EventSessionUpdated})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			after, _ := s.LastEventSeq(ctx)
			stored, _ := s.Session(ctx, orig.ID)
			if stored.Title != tt.wantTitle {
				t.Errorf("stored title %q, want %q", stored.Title, tt.wantTitle)
			}
			if err != nil {
				if after != before {
					t.Errorf("aborted update appended events")
				}
				if _, err := s.SessionAt(ctx, "y", core.Place{Chat: "2"}); !errors.Is(err, core.ErrNotFound) {
					t.Errorf("aborted update indexed a place: %v", err)
				}
				return
			}
			if got.ID != orig.ID || !reflect.DeepEqual(got, stored) {
				t.Errorf("returned %+v, stored %+v", got, stored)
			}
			if !got.Updated.Equal(clk.Now()) {
				t.Errorf("Updated = %v, want now %v", got.Updated, clk.Now())
			}
			if len(evs) != 1 || evs[0].Seq != before+1 || evs[0].Session != orig.ID {
				t.Errorf("events = %+v", evs)
			}
		})
	}
}

func testUpdateSessionCopiesDoNotAlias(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	sess := CreateSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{"x": Bind("x", "1", "")}})
	sess.Bindings["x"] = Bind("x", "mutated", "")
	got, _, err := s.UpdateSession(ctx, sess.ID, func(s *core.Session) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got.Bindings["x"] = Bind("x", "mutated again", "")
	stored, _ := s.Session(ctx, sess.ID)
	if stored.Bindings["x"].Place.Chat != "1" {
		t.Errorf("stored binding changed through a returned map: %+v", stored.Bindings)
	}
}

func testSessionsPage(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	// 25 sessions a minute apart; every third closed. Created is set
	// against the id order for some, to show pages follow ids.
	var all []core.SessionID // oldest first
	closed := map[core.SessionID]bool{}
	for i := range 25 {
		id := core.SessionID(IDAt(t0.Add(time.Duration(i) * time.Minute)))
		st := core.StatusIdle
		if i%3 == 0 {
			st = core.StatusClosed
			closed[id] = true
		}
		CreateSession(t, s, core.Session{ID: id, Title: "s", Status: st, Output: "a long output"})
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
		{"after an id past the newest", core.SessionQuery{After: core.SessionID(IDAt(t0.Add(time.Hour)))}, newest(nil), 1},
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

	// Sessions come back whole.
	page, _, err := s.SessionsPage(ctx, core.SessionQuery{Limit: 1})
	Must(t, err)
	if len(page) != 1 || page[0].Output != "a long output" || page[0].Title != "s" {
		t.Errorf("page = %+v", page)
	}
}

func testSessionsPageStreaming(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	var ids []core.SessionID
	for i := range 10 {
		ids = append(ids, CreateSession(t, s, core.Session{ID: core.SessionID(IDAt(time.Unix(int64(i), 0))), Title: "s"}).ID)
	}
	// Streaming lists the sessions with a live output not yet final,
	// whatever their titles or their bindings' metadata hold.
	Must(t, func() error {
		_, _, err := s.UpdateSession(ctx, ids[3], func(ss *core.Session) error { ss.Output = "half"; return nil })
		return err
	}())
	Must(t, func() error {
		_, _, err := s.UpdateSession(ctx, ids[4], func(ss *core.Session) error {
			ss.Output, ss.OutputFinal = "done", true
			return nil
		})
		return err
	}())
	Must(t, func() error {
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
		Must(t, err)
		if len(got) != 1 || got[0].ID != ids[3] || next != "" {
			t.Errorf("Streaming, limit %d: %d sessions (next %q), want only %s", limit, len(got), next, ids[3])
		}
	}

}

// testApprovalsSurviveRestart: what binds an approval to its call — the
// open question's call and digest, the decision's digest — is kept with
// the session and read back the same after a restart, so a decision made
// before it still belongs to the call it was given for.
func testApprovalsSurviveRestart(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	sess := CreateSession(t, s, core.Session{Title: "approvals"})
	asked := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	want := core.Session{
		Questions: []core.Question{{ID: "q2", Text: "🔐 Approve this tool call?", Options: []string{"Approve", "Deny and continue", "Deny and abort"},
			Asked: asked, Call: "c2", Digest: "d2"}},
		Tools: []core.ToolState{
			{CallID: "c1", Tool: "shell", Cmd: "echo harmless", Decision: core.DecisionApprove, Digest: "d1"},
			{CallID: "c2", Tool: "shell", Cmd: "rm -rf ~", Question: "q2"},
		},
	}
	if _, _, err := s.UpdateSession(ctx, sess.ID, func(ss *core.Session) error {
		ss.Questions, ss.Tools = want.Questions, want.Tools
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = again(t, Options{})
	got, err := s.Session(ctx, sess.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Questions, want.Questions) || !reflect.DeepEqual(got.Tools, want.Tools) {
		t.Errorf("after a restart: questions %+v tools %+v, want %+v %+v", got.Questions, got.Tools, want.Questions, want.Tools)
	}
}

// testSessionAgentSurvivesRestart: the agent a session runs with is kept
// as it was created and as it was switched, and read back the same after
// a restart, by Session and by SessionsPage.
func testSessionAgentSurvivesRestart(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	codex := CreateSession(t, s, core.Session{Title: "codex", Agent: "codex"})
	plain := CreateSession(t, s, core.Session{Title: "default"})
	if codex.Agent != "codex" || plain.Agent != "" {
		t.Fatalf("created with agents %q and %q", codex.Agent, plain.Agent)
	}
	if _, _, err := s.UpdateSession(ctx, plain.ID, func(ss *core.Session) error {
		ss.Agent = "opencode"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = again(t, Options{})
	want := map[core.SessionID]string{codex.ID: "codex", plain.ID: "opencode"}
	for id, agent := range want {
		got, err := s.Session(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Agent != agent {
			t.Errorf("session %s runs with %q after a restart, want %q", got.Title, got.Agent, agent)
		}
	}
	page, _, err := s.SessionsPage(ctx, core.SessionQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range page {
		if ss.Agent != want[ss.ID] {
			t.Errorf("SessionsPage: session %s runs with %q, want %q", ss.Title, ss.Agent, want[ss.ID])
		}
	}
}
