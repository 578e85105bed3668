package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func testAppend(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})
	sess := CreateSession(t, s, core.Session{Title: "t"})
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

func testAppendMissingSession(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
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
	sess := CreateSession(t, s, core.Session{})
	res, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"}, DedupKey: "k"})
	if err != nil || res.Duplicate {
		t.Errorf("Append after refusals: %+v, %v", res, err)
	}
	if last, _ := s.LastEventSeq(ctx); last != 0 {
		t.Errorf("refused appends wrote events: last seq %d", last)
	}
}

// testAppendConcurrentWithFailures runs appends that succeed, duplicate, miss
// their session and panic side by side, so that they share transactions and
// the failing ones make their groups run again.
func testAppendConcurrentWithFailures(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	sess := CreateSession(t, s, core.Session{})
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
	CheckIncreasing(t, IDs(inbox))
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

func testAppendSessionResult(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	s, _ := e.Open(t, Options{Now: clk.Now})
	created := CreateSession(t, s, core.Session{Title: "t", LastInputOrigin: "web"})
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
	got.Bindings = map[core.AdapterName]core.Binding{"x": Bind("x", "1", "")}
	if _, _, err := s.UpdateSession(ctx, created.ID, func(s *core.Session) error {
		s.Title = "renamed"
		s.Bindings = map[core.AdapterName]core.Binding{"web": Bind("web", "page", "")}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	got = appendUpdate(nil)
	if got.Title != "renamed" {
		t.Errorf("Append returned a stale session %+v", got)
	}
	got.Bindings["web"] = Bind("web", "mutated", "")
	if again := appendUpdate(nil); again.Bindings["web"].Place.Chat != "page" {
		t.Errorf("a returned session's map was shared: %+v", again.Bindings)
	}
}

func testIDsMonotonicConcurrent(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	sessions := make([]core.SessionID, 4)
	for i := range sessions {
		sessions[i] = CreateSession(t, s, core.Session{}).ID
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
		CheckIncreasing(t, got[w])
	}
	// ...and the inbox, in key order, is every id once.
	inbox, err := s.Inbox(ctx, "", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(got...)
	slices.Sort(want)
	if !reflect.DeepEqual(IDs(inbox), want) {
		t.Errorf("inbox holds %d ids, appends returned %d", len(inbox), len(want))
	}
	CheckIncreasing(t, want)
}

func testIDsMonotonicClockBackwardsAndReopen(t *testing.T, e Engine) {
	ctx := context.Background()
	clk := NewClock()
	opts := Options{Now: clk.Now}
	s, again := e.Open(t, opts)
	sess := CreateSession(t, s, core.Session{})
	var got []core.MessageID
	steps := []time.Duration{0, 0, time.Millisecond, -time.Hour, 0, 2 * time.Hour, -time.Second}
	for _, d := range steps {
		clk.Add(d)
		got = append(got, AppendText(t, s, sess.ID, "x").ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen with the clock a day behind the last id.
	clk.Add(-24 * time.Hour)
	s = again(t, opts)
	for range 3 {
		got = append(got, AppendText(t, s, sess.ID, "x").ID)
	}
	clk.Add(48 * time.Hour)
	got = append(got, AppendText(t, s, sess.ID, "x").ID)
	CheckIncreasing(t, got)

	inbox, err := s.Inbox(ctx, sess.ID, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(IDs(inbox), got) {
		t.Errorf("inbox %v, want %v", IDs(inbox), got)
	}
}

func testDeduped(t *testing.T, e Engine) {
	s, _ := e.Open(t, Options{})
	ctx := context.Background()
	sess := CreateSession(t, s, core.Session{Title: "d"})
	if _, ok, err := s.Deduped(ctx, "telegram\x00-100:7"); err != nil || ok {
		t.Fatalf("unknown key: ok=%v err=%v", ok, err)
	}
	res, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "hi"}, DedupKey: "telegram\x00-100:7"})
	if err != nil {
		t.Fatal(err)
	}
	m, ok, err := s.Deduped(ctx, "telegram\x00-100:7")
	if err != nil || !ok || m.ID != res.Message.ID || m.Content != "hi" {
		t.Errorf("Deduped = %+v, %v, %v; want the appended message", m, ok, err)
	}
}

func testCanceledContextWritesNothing(t *testing.T, e Engine) {
	s, _ := e.Open(t, Options{})
	sess := CreateSession(t, s, core.Session{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "x"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("Append: err = %v, want context.Canceled", err)
	}
	if got, _ := s.Inbox(context.Background(), sess.ID, "", 0); len(got) != 0 {
		t.Errorf("a canceled Append wrote %v", Contents(got))
	}
}

// InboxTail agrees with reading everything forward and keeping the end, for
// all sessions and for one, before and after the recent entries are folded.
func testInboxTail(t *testing.T, e Engine) {
	s, _ := e.Open(t, Options{})
	ctx := context.Background()
	a := CreateSession(t, s, core.Session{Title: "a"}).ID
	b := CreateSession(t, s, core.Session{Title: "b"}).ID
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
				if fmt.Sprint(IDs(tail)) != fmt.Sprint(IDs(want)) {
					t.Fatalf("%s: InboxTail(%q, %d) = %d messages %v…, want %d", stage, scope, n, len(tail), first(IDs(tail)), len(want))
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

// testInboxPaging reads one session's inbox and all of them, whole and in
// pages, with messages of two sessions interleaved.
func testInboxPaging(t *testing.T, e Engine) {
	ctx := context.Background()
	s, _ := e.Open(t, Options{})
	a := CreateSession(t, s, core.Session{})
	b := CreateSession(t, s, core.Session{})
	// Interleave: a0 b0 a1 b1 ...
	var all, inA, inB []core.Message
	for i := range 5 {
		m := AppendText(t, s, a.ID, fmt.Sprint("a", i))
		all, inA = append(all, m), append(inA, m)
		m = AppendText(t, s, b.ID, fmt.Sprint("b", i))
		all, inB = append(all, m), append(inB, m)
	}
	CheckIncreasing(t, IDs(all))

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
			if !reflect.DeepEqual(Contents(got), Contents(tt.want)) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", Contents(got), Contents(tt.want))
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
	if !reflect.DeepEqual(IDs(paged), IDs(all)) {
		t.Errorf("paged %v, want %v", Contents(paged), Contents(all))
	}
}
