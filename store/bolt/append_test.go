package bolt

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestAppend(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})
	sess := createSession(t, s, core.Session{Title: "t"})
	ref := core.MessageRef{Adapter: "telegram", Place: core.Place{Chat: "-100", Thread: "7"}, ID: "42"}

	res, err := s.Append(ctx, core.Append{
		Message: core.Message{
			Session: sess.ID, Role: core.RoleUser, Origin: "telegram", Content: "hello",
			Attachments: []core.Attachment{{Name: "a.txt", Size: 1}}, Ref: ref,
		},
		DedupKey: "telegram/42",
		Update:   func(s *core.Session) { s.LastInputOrigin = "telegram" },
		Events: []core.Event{
			{Kind: core.EventHumanMessage, Message: &core.Message{Content: "ignored: the stored message wins"}},
			{Kind: core.EventQueued},
		},
		Cleanup: []core.CleanupEntry{{Ref: ref, Lifetime: core.LifetimeNextInput, Others: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Message
	if res.Duplicate || !core.ValidID(string(m.ID)) || !m.Time.Equal(clk.Now()) || m.Content != "hello" {
		t.Errorf("result message %+v, duplicate %v", m, res.Duplicate)
	}
	if res.Session.LastInputOrigin != "telegram" || res.Session.ID != sess.ID {
		t.Errorf("result session %+v", res.Session)
	}
	if len(res.Events) != 2 || res.Events[0].Seq+1 != res.Events[1].Seq {
		t.Fatalf("result events %+v", res.Events)
	}
	if e := res.Events[0]; e.Message == nil || !reflect.DeepEqual(*e.Message, m) || e.Session != sess.ID {
		t.Errorf("event 0 = %+v, message %+v; want the stored message %+v", e, e.Message, m)
	}
	if res.Events[1].Message != nil {
		t.Errorf("event 1 got a message")
	}
	// Returned copies do not alias each other or the store.
	res.Events[0].Message.Attachments[0].Name = "changed"
	if m.Attachments[0].Name != "a.txt" {
		t.Errorf("event message shares attachments with the result message")
	}

	stored, err := s.Session(ctx, sess.ID)
	if err != nil || stored.LastInputOrigin != "telegram" {
		t.Errorf("stored session %+v, %v", stored, err)
	}
	inbox, err := s.Inbox(ctx, sess.ID, "", 0)
	if err != nil || len(inbox) != 1 || !reflect.DeepEqual(inbox[0], m) {
		t.Errorf("Inbox = %+v, %v; want [%+v]", inbox, err, m)
	}
	evs, err := s.EventsSince(ctx, 0, 0)
	if err != nil || len(evs) != 2 || evs[0].Message == nil || !reflect.DeepEqual(*evs[0].Message, m) {
		t.Errorf("EventsSince = %+v, %v", evs, err)
	}
	rows, err := s.Cleanup(ctx, sess.ID)
	if err != nil || len(rows) != 1 || rows[0].Ref != ref || rows[0].Session != sess.ID || !rows[0].Created.Equal(clk.Now()) {
		t.Errorf("Cleanup = %+v, %v", rows, err)
	}

	// A redelivery writes nothing and returns the first message.
	clk.Add(time.Minute)
	dup, err := s.Append(ctx, core.Append{
		Message:  core.Message{Session: sess.ID, Content: "hello again"},
		DedupKey: "telegram/42",
		Update:   func(s *core.Session) { s.Title = "must not apply" },
		Events:   []core.Event{{Kind: core.EventHumanMessage}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !dup.Duplicate || !reflect.DeepEqual(dup.Message, m) || dup.Session.Title != "t" || dup.Events != nil {
		t.Errorf("duplicate result %+v", dup)
	}
	if last, _ := s.LastEventSeq(ctx); last != 2 {
		t.Errorf("duplicate appended events: last seq %d", last)
	}
	if inbox, _ := s.Inbox(ctx, "", "", 0); len(inbox) != 1 {
		t.Errorf("duplicate appended a message: %+v", inbox)
	}
}

func TestAppendMissingSession(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	for _, id := range []core.SessionID{"", "nope"} {
		_, err := s.Append(ctx, core.Append{
			Message:  core.Message{Session: id, Content: "x"},
			DedupKey: "k",
			Events:   []core.Event{{Kind: core.EventHumanMessage}},
		})
		if !errors.Is(err, core.ErrNotFound) {
			t.Errorf("Append to %q: err = %v, want ErrNotFound", id, err)
		}
	}
	// The refused appends left no dedup key, message or event behind.
	sess := createSession(t, s, core.Session{})
	res, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"}, DedupKey: "k"})
	if err != nil || res.Duplicate {
		t.Errorf("Append after refusals: %+v, %v", res, err)
	}
	if last, _ := s.LastEventSeq(ctx); last != 0 {
		t.Errorf("refused appends wrote events: last seq %d", last)
	}
}

// TestAppendGroupWithFailures runs appends that succeed, duplicate, miss
// their session and panic side by side, so that they share transactions and
// the failing ones make their groups run again.
func TestAppendGroupWithFailures(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	sess := createSession(t, s, core.Session{})
	const n = 200
	var wg sync.WaitGroup
	errs := make([]error, n)
	results := make([]core.AppendResult, n)
	for i := range n {
		wg.Go(func() {
			a := core.Append{
				Message:  core.Message{Session: sess.ID, Content: fmt.Sprint(i)},
				DedupKey: fmt.Sprint("k", i/2), // pairs race for one key
				Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
			}
			switch i % 10 {
			case 3:
				a.Message.Session = "missing"
				a.DedupKey = fmt.Sprint("missing", i)
			case 7:
				a.DedupKey = fmt.Sprint("panic", i)
				a.Update = func(*core.Session) { panic("update panics") }
			}
			results[i], errs[i] = s.Append(ctx, a)
		})
	}
	wg.Wait()

	byKey := map[string]core.MessageID{}
	stored := 0
	for i := range n {
		switch i % 10 {
		case 3:
			if !errors.Is(errs[i], core.ErrNotFound) {
				t.Errorf("append %d: err = %v, want ErrNotFound", i, errs[i])
			}
			continue
		case 7:
			if errs[i] == nil {
				t.Errorf("append %d: a panicking Update succeeded", i)
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("append %d: %v", i, errs[i])
		}
		r := results[i]
		key := fmt.Sprint("k", i/2)
		if prev, ok := byKey[key]; ok && prev != r.Message.ID {
			t.Errorf("key %s: ids %s and %s", key, prev, r.Message.ID)
		}
		byKey[key] = r.Message.ID
		if !r.Duplicate {
			stored++
			if len(r.Events) != 1 || r.Events[0].Message == nil || r.Events[0].Message.ID != r.Message.ID {
				t.Errorf("append %d: events %+v", i, r.Events)
			}
		}
	}
	inbox, err := s.Inbox(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(inbox) != stored || len(inbox) != len(byKey) {
		t.Errorf("inbox has %d messages, %d appends stored, %d distinct keys", len(inbox), stored, len(byKey))
	}
	checkIncreasing(t, ids(inbox))
	evs, err := s.EventsSince(ctx, 0, 0)
	if err != nil || len(evs) != stored {
		t.Errorf("EventsSince: %d events, %v; want %d", len(evs), err, stored)
	}
	for i, e := range evs {
		if e.Seq != uint64(i+1) || e.Message == nil {
			t.Errorf("event %d: %+v", i, e)
		}
	}
}

// TestInboxPaging runs with the per-session index folded after every
// append, every few appends and never, so that reads cross the boundary
// between folded and recent entries everywhere.
func TestInboxPaging(t *testing.T) {
	for _, foldAt := range []uint64{1, 3, 7, 1 << 40} {
		t.Run(fmt.Sprint("foldAt=", foldAt), func(t *testing.T) { testInboxPaging(t, foldAt) })
	}
}

func testInboxPaging(t *testing.T, foldAt uint64) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	s.foldAt = foldAt
	a := createSession(t, s, core.Session{})
	b := createSession(t, s, core.Session{})
	// Interleave: a0 b0 a1 b1 ...
	var all, inA, inB []core.Message
	for i := range 5 {
		m := appendText(t, s, a.ID, fmt.Sprint("a", i))
		all, inA = append(all, m), append(inA, m)
		m = appendText(t, s, b.ID, fmt.Sprint("b", i))
		all, inB = append(all, m), append(inB, m)
	}
	checkIncreasing(t, ids(all))

	tests := []struct {
		name    string
		session core.SessionID
		after   core.MessageID
		limit   int
		want    []core.Message
	}{
		{"session all", a.ID, "", 0, inA},
		{"session limit", a.ID, "", 2, inA[:2]},
		{"session after", a.ID, inA[1].ID, 0, inA[2:]},
		{"session after and limit", a.ID, inA[1].ID, 2, inA[2:4]},
		{"session after last", a.ID, inA[4].ID, 0, nil},
		{"session after another session's id", b.ID, inA[2].ID, 0, inB[2:]},
		{"session after an id between its own", a.ID, inB[1].ID, 1, inA[2:3]},
		{"all sessions", "", "", 0, all},
		{"all sessions after", "", inB[2].ID, 3, all[6:9]},
		{"all sessions after last", "", all[9].ID, 0, nil},
		{"unknown session", "nope", "", 0, nil},
		{"after is before every id", a.ID, "00000000000000000000000000", 0, inA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Inbox(ctx, tt.session, tt.after, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(contents(got), contents(tt.want)) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", contents(got), contents(tt.want))
			}
		})
	}

	// Paging with the last id of each page reads everything exactly once.
	var paged []core.Message
	after := core.MessageID("")
	for {
		page, err := s.Inbox(ctx, "", after, 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(ids(paged), ids(all)) {
		t.Errorf("paged %v, want %v", contents(paged), contents(all))
	}
}

func TestIDsMonotonicConcurrent(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	sessions := make([]core.SessionID, 4)
	for i := range sessions {
		sessions[i] = createSession(t, s, core.Session{}).ID
	}
	const writers, each = 32, 40
	var wg sync.WaitGroup
	got := make([][]core.MessageID, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				res, err := s.Append(ctx, core.Append{
					Message:  core.Message{Session: sessions[(w+i)%len(sessions)], Content: "x"},
					DedupKey: fmt.Sprint(w, "/", i),
				})
				if err != nil {
					t.Error(err)
					return
				}
				got[w] = append(got[w], res.Message.ID)
			}
		})
	}
	wg.Wait()
	// Each writer saw its own appends in increasing order...
	for w := range writers {
		checkIncreasing(t, got[w])
	}
	// ...and the inbox, in key order, is every id once.
	inbox, err := s.Inbox(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(got...)
	slices.Sort(want)
	if !reflect.DeepEqual(ids(inbox), want) {
		t.Errorf("inbox holds %d ids, appends returned %d", len(inbox), len(want))
	}
	checkIncreasing(t, want)
}

func TestIDsMonotonicClockBackwardsAndReopen(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	path := filepath.Join(t.TempDir(), "parley.db")
	opts := Options{Now: clk.Now, NoSync: true}
	s, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	sess := createSession(t, s, core.Session{})
	var got []core.MessageID
	steps := []time.Duration{0, 0, time.Millisecond, -time.Hour, 0, 2 * time.Hour, -time.Second}
	for _, d := range steps {
		clk.Add(d)
		got = append(got, appendText(t, s, sess.ID, "x").ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen with the clock a day behind the last id.
	clk.Add(-24 * time.Hour)
	s = openAt(t, path, opts)
	for range 3 {
		got = append(got, appendText(t, s, sess.ID, "x").ID)
	}
	clk.Add(48 * time.Hour)
	got = append(got, appendText(t, s, sess.ID, "x").ID)
	checkIncreasing(t, got)

	inbox, err := s.Inbox(ctx, sess.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids(inbox), got) {
		t.Errorf("inbox %v, want %v", ids(inbox), got)
	}
}

// The unclean-stop test re-executes the test binary: the child appends and
// then dies without Close, the parent opens the file afterwards.
const (
	childEnv     = "PARLEY_BOLT_TEST_CHILD"
	childPathEnv = "PARLEY_BOLT_TEST_PATH"
)

func TestUncleanStop(t *testing.T) {
	if mode := os.Getenv(childEnv); mode != "" {
		uncleanChild(mode, os.Getenv(childPathEnv))
		return
	}
	for _, mode := range []string{"exit", "kill"} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "parley.db")
			cmd := exec.Command(os.Args[0], "-test.run=^TestUncleanStop$")
			cmd.Env = append(os.Environ(), childEnv+"="+mode, childPathEnv+"="+path)
			cmd.Stderr = os.Stderr
			stdin, err := cmd.StdinPipe() // the "kill" child blocks on it
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			if err != nil {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("child: %v (read %q)", err, line)
			}
			var sid, mid string
			if _, err := fmt.Sscanf(line, "appended %s %s", &sid, &mid); err != nil {
				t.Fatalf("child said %q: %v", line, err)
			}
			if mode == "kill" {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			_ = cmd.Wait()

			s := openAt(t, path, Options{NoSync: true})
			inbox, err := s.Inbox(ctx, core.SessionID(sid), "", 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(inbox) != 1 || string(inbox[0].ID) != mid || inbox[0].Content != "survives" {
				t.Fatalf("inbox after restart = %+v, want one message %s", inbox, mid)
			}
			res, err := s.Append(ctx, core.Append{
				Message:  core.Message{Session: core.SessionID(sid), Content: "redelivered"},
				DedupKey: "telegram/1",
			})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Duplicate || string(res.Message.ID) != mid || res.Message.Content != "survives" {
				t.Errorf("redelivery after restart = %+v, want duplicate of %s", res, mid)
			}
			if evs, err := s.EventsSince(ctx, 0, 0); err != nil || len(evs) != 1 || evs[0].Message == nil || string(evs[0].Message.ID) != mid {
				t.Errorf("events after restart = %+v, %v", evs, err)
			}
		})
	}
}

// uncleanChild appends one message durably, reports it and stops without
// closing the store.
func uncleanChild(mode, path string) {
	ctx := context.Background()
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	sess, _, err := s.CreateSession(ctx, core.Session{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	res, err := s.Append(ctx, core.Append{
		Message:  core.Message{Session: sess.ID, Content: "survives"},
		DedupKey: "telegram/1",
		Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Printf("appended %s %s\n", sess.ID, res.Message.ID)
	if mode == "kill" {
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until killed
	}
	os.Exit(0)
}

func TestInboxAcrossFoldAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "parley.db")
	s, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	a := createSession(t, s, core.Session{})
	b := createSession(t, s, core.Session{})
	var inA []core.MessageID
	for i := range 10 {
		inA = append(inA, appendText(t, s, a.ID, fmt.Sprint(i)).ID)
		appendText(t, s, b.ID, fmt.Sprint(i))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Everything is still recent; the first append after the reopen folds.
	s = openAt(t, path, Options{NoSync: true})
	s.foldAt = 5
	inA = append(inA, appendText(t, s, a.ID, "after reopen").ID)
	got, err := s.Inbox(ctx, a.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ids(got), inA) {
		t.Errorf("Inbox(a) = %v, want %v", ids(got), inA)
	}
	if got, _ := s.Inbox(ctx, a.ID, inA[9], 0); len(got) != 1 || got[0].Content != "after reopen" {
		t.Errorf("Inbox(a, after the last folded) = %v", contents(got))
	}
}

func TestAppendSessionResult(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, _ := openTemp(t, Options{Now: clk.Now})
	created := createSession(t, s, core.Session{Title: "t", LastInputOrigin: "web"})
	appendUpdate := func(update func(*core.Session)) core.Session {
		t.Helper()
		clk.Add(time.Minute)
		res, err := s.Append(ctx, core.Append{Message: core.Message{Session: created.ID, Content: "x"}, Update: update})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := s.Session(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(res.Session, stored) {
			t.Fatalf("Append returned session %+v, stored is %+v", res.Session, stored)
		}
		return res.Session
	}

	// An update that changes nothing writes nothing.
	if got := appendUpdate(func(s *core.Session) { s.LastInputOrigin = "web" }); !got.Updated.Equal(created.Updated) {
		t.Errorf("no-op update moved Updated from %v to %v", created.Updated, got.Updated)
	}
	// A change moves Updated to now.
	got := appendUpdate(func(s *core.Session) { s.LastInputOrigin = "telegram" })
	if got.LastInputOrigin != "telegram" || !got.Updated.Equal(clk.Now()) {
		t.Errorf("after a change: %+v, want telegram at %v", got, clk.Now())
	}
	// Without Update the current session comes back, also after it was
	// changed elsewhere, and no returned copy shares its bindings.
	got = appendUpdate(nil)
	got.Bindings = map[core.AdapterName]core.Binding{"x": bind("x", "1", "")}
	if _, _, err := s.UpdateSession(ctx, created.ID, func(s *core.Session) error {
		s.Title = "renamed"
		s.Bindings = map[core.AdapterName]core.Binding{"web": bind("web", "page", "")}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = appendUpdate(nil)
	if got.Title != "renamed" {
		t.Errorf("Append returned a stale session %+v", got)
	}
	got.Bindings["web"] = bind("web", "mutated", "")
	if again := appendUpdate(nil); again.Bindings["web"].Place.Chat != "page" {
		t.Errorf("a returned session's map was shared: %+v", again.Bindings)
	}
}
