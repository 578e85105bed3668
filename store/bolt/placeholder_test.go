package bolt

import (
	"context"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/parley-chat/parley/core"
)

// The rule parley recognised placeholders by before they were stored as a
// value, kept for the sessions of that time.
func TestLegacyPlaceholder(t *testing.T) {
	created := time.Date(2026, 11, 23, 21, 4, 30, 0, time.UTC)
	tests := []struct {
		title string
		want  bool
	}{
		{"Session Nov 23 21:04", true},
		{"Session Nov 23 21:03", true}, // an adapter's clock, a minute earlier
		{"Session Nov 23 21:06", true},
		{"Session Nov 23 21:07", false},
		{"Session Nov 22 21:04", false},
		{"Session Nov 23 9:04", false},
		{"Session Nov 23 21:04 notes", false},
		{"session Nov 23 21:04", false},
		{"Release checklist", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := legacyPlaceholder(tt.title, created); got != tt.want {
			t.Errorf("legacyPlaceholder(%q) = %v, want %v", tt.title, got, tt.want)
		}
	}
	// Across New Year's Eve the placeholder's year is the one before.
	ny := time.Date(2027, 1, 1, 0, 0, 10, 0, time.UTC)
	if !legacyPlaceholder("Session Dec 31 23:59", ny) {
		t.Error("a placeholder from the minute before New Year is not recognised")
	}
}

// A file written before sessions kept their placeholder as a value gets it
// at Open, once: sessions whose title had the placeholder's shape and
// minute, and no others; nothing else of them changes. Sessions stored
// after that are left as they are stored, whatever their title looks like.
func TestOpenMarksLegacyPlaceholders(t *testing.T) {
	ctx := context.Background()
	clk := newClock() // 12:00 on Nov 21
	s, path := openTemp(t, Options{Now: clk.Now})
	create := func(title string, created time.Time) core.SessionID {
		t.Helper()
		sess, _, err := s.CreateSession(ctx, core.Session{Title: title, Created: created, Updated: created})
		must(t, err)
		return sess.ID
	}
	noon := clk.Now()
	ids := map[core.SessionID]string{ // id → the placeholder it must get
		create("Session Nov 21 12:00", noon.Add(30*time.Second)): "Session Nov 21 12:00",
		create("Session Nov 21 11:59", noon):                     "Session Nov 21 11:59",
		create("Session Nov 21 12:07", noon):                     "",
		create("Release checklist", noon):                        "",
		create("Session of the week", noon):                      "",
	}
	before := map[core.SessionID]core.Session{}
	for id := range ids {
		sess, err := s.Session(ctx, id)
		must(t, err)
		before[id] = sess
	}
	must(t, s.Close())
	// As an older parley left it: no mark in meta.
	forgetMark(t, path)

	s = openAt(t, path, Options{NoSync: true, Now: clk.Now})
	for id, want := range ids {
		sess, err := s.Session(ctx, id)
		must(t, err)
		if sess.Placeholder != want {
			t.Errorf("%q: placeholder %q, want %q", sess.Title, sess.Placeholder, want)
		}
		was := before[id]
		was.Placeholder = sess.Placeholder
		if !sess.Updated.Equal(was.Updated) || sess.Title != was.Title || sess.Status != was.Status {
			t.Errorf("marking changed %q: %+v, was %+v", sess.Title, sess, was)
		}
	}

	// Marked once: a title of the shape stored since, chosen by a
	// person, stays a chosen title across reopening.
	chosen := create("Session Nov 21 12:00", noon)
	must(t, s.Close())
	s = openAt(t, path, Options{NoSync: true, Now: clk.Now})
	sess, err := s.Session(ctx, chosen)
	must(t, err)
	if sess.Placeholder != "" {
		t.Errorf("a session stored after the marking got placeholder %q at reopening", sess.Placeholder)
	}
}

// forgetMark removes the placeholders mark from a closed store's meta.
func forgetMark(tb testing.TB, path string) {
	tb.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	must(tb, err)
	must(tb, db.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyPlaceholders) }))
	must(tb, db.Close())
}
