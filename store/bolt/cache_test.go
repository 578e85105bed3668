package bolt

import (
	"context"
	"fmt"
	"testing"

	"github.com/parley-chat/parley/core"
)

// TestSessionCacheIsBounded: creating and using more sessions than the
// cache holds keeps it at its bound, with the sessions used last in it.
func TestSessionCacheIsBounded(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{})
	var first core.Session
	for i := range sessionCacheSize + 100 {
		sess := createSession(t, s, core.Session{Title: fmt.Sprint("session ", i)})
		if i == 0 {
			first = sess
		}
		appendText(t, s, sess.ID, "hello")
	}
	if n := s.cache.len(); n != sessionCacheSize {
		t.Errorf("the cache holds %d sessions, want its bound %d", n, sessionCacheSize)
	}
	// The oldest was evicted; reading it brings it back, evicting another.
	if s.cache.m[first.ID] != nil {
		t.Error("the least recently used session is still cached")
	}
	got, err := s.Session(ctx, first.ID)
	if err != nil || got.Title != "session 0" {
		t.Fatalf("Session: %+v, %v", got, err)
	}
	if s.cache.m[first.ID] == nil || s.cache.len() != sessionCacheSize {
		t.Errorf("after a read: cached %v, %d sessions", s.cache.m[first.ID] != nil, s.cache.len())
	}
}

// TestSessionCacheEvictsLeastRecentlyUsed: a hit counts as a use.
func TestSessionCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := sessionCache{max: 2}
	raw := func(title string) []byte { return []byte(`{"id":"x","title":"` + title + `"}`) }
	for _, id := range []core.SessionID{"a", "b"} {
		if _, err := c.decode(id, raw(string(id))); err != nil {
			t.Fatal(err)
		}
	}
	if c.match("a", raw("a")) == nil { // a is now the most recent
		t.Fatal("a not cached")
	}
	if _, err := c.decode("c", raw("c")); err != nil {
		t.Fatal(err)
	}
	if c.match("b", raw("b")) != nil || c.match("a", raw("a")) == nil || c.match("c", raw("c")) == nil {
		t.Errorf("want a and c cached, b evicted; have %d entries", c.len())
	}
}
