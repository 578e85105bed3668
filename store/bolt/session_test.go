package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

func TestCreateSession(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})

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

func TestSessionsOldestFirst(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})
	var want []core.SessionID
	for range 5 {
		want = append(want, createSession(t, s, core.Session{}).ID)
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

func bind(adapter core.AdapterName, chat, thread string) core.Binding {
	return core.Binding{Adapter: adapter, Place: core.Place{Chat: chat, Thread: thread}}
}

func TestPlaceIndexFollowsBindings(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	tg, sl := core.AdapterName("telegram"), core.AdapterName("slack")
	a := createSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{
		tg: bind(tg, "-100", "7"),
	}})
	b := createSession(t, s, core.Session{})

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
				s.Bindings[sl] = bind(sl, "C1", "1700000000.000100")
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
				s.Bindings[tg] = bind(tg, "-100", "8")
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
				s.Bindings = map[core.AdapterName]core.Binding{tg: bind(tg, "-100", "8")}
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

func TestPlaceKeysAreUnambiguous(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	// Concatenated without length prefixes these two would be one key.
	x := createSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{"m": bind("m", "ab", "c")}})
	y := createSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{"m": bind("m", "a", "bc")}})
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

func TestUpdateSession(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})
	orig := createSession(t, s, core.Session{Title: "t", Bindings: map[core.AdapterName]core.Binding{"x": bind("x", "1", "")}})
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
			s.Bindings["y"] = bind("y", "2", "")
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

func TestUpdateSessionCopiesDoNotAlias(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	sess := createSession(t, s, core.Session{Bindings: map[core.AdapterName]core.Binding{"x": bind("x", "1", "")}})
	sess.Bindings["x"] = bind("x", "mutated", "")
	got, _, err := s.UpdateSession(ctx, sess.ID, func(s *core.Session) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	got.Bindings["x"] = bind("x", "mutated again", "")
	stored, _ := s.Session(ctx, sess.ID)
	if stored.Bindings["x"].Place.Chat != "1" {
		t.Errorf("stored binding changed through a returned map: %+v", stored.Bindings)
	}
}

func TestSchemaTooNew(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		return b.Put(keySchema, []byte("99"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	_, err = Open(path, Options{NoSync: true})
	if !errors.Is(err, core.ErrSchemaTooNew) {
		t.Fatalf("Open: err = %v, want ErrSchemaTooNew", err)
	}
	t.Logf("Open: %v", err)

	// The refused file is untouched and the lock released.
	db, err = bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_ = db.View(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketSessions) != nil {
			t.Errorf("Open created buckets in a newer file")
		}
		return nil
	})
}

func TestReopenKeepsSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.SetCursor(context.Background(), "x", "y"); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: err = %v, want ErrClosed", err)
	}
	openAt(t, path, Options{NoSync: true})
}

func TestCanceledContextWritesNothing(t *testing.T) {
	s, _ := openTemp(t, Options{})
	sess := createSession(t, s, core.Session{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Append: err = %v, want context.Canceled", err)
	}
	if got, _ := s.Inbox(context.Background(), sess.ID, "", 0); len(got) != 0 {
		t.Errorf("a canceled Append wrote %v", contents(got))
	}
}

// TestCloseWhileWriting checks that Close lets every queued write finish:
// each Append either succeeded, and is then in the file, or got ErrClosed.
func TestCloseWhileWriting(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	sess := createSession(t, s, core.Session{})
	var ok atomic.Int64
	started := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: fmt.Sprint(w, "/", i)}})
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				if ok.Add(1) == 100 {
					close(started)
				}
			}
		})
	}
	<-started
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s = openAt(t, path, Options{NoSync: true})
	got, err := s.Inbox(ctx, sess.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(got)) != ok.Load() {
		t.Errorf("%d appends succeeded, the inbox holds %d", ok.Load(), len(got))
	}
}
