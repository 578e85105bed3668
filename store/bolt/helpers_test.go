package bolt

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// clock is a settable clock for Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock {
	return &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// openAt opens a store at path with fast, non-durable commits unless opts
// says otherwise, and closes it when the test ends.
func openAt(tb testing.TB, path string, opts Options) *Store {
	tb.Helper()
	s, err := Open(path, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	return s
}

// openTemp opens a fresh store in a temporary directory and returns it with
// its path.
func openTemp(tb testing.TB, opts Options) (*Store, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "parley.db")
	opts.NoSync = true
	return openAt(tb, path, opts), path
}

func createSession(tb testing.TB, s *Store, sess core.Session) core.Session {
	tb.Helper()
	got, _, err := s.CreateSession(context.Background(), sess)
	if err != nil {
		tb.Fatalf("CreateSession: %v", err)
	}
	return got
}

func appendText(tb testing.TB, s *Store, session core.SessionID, text string) core.Message {
	tb.Helper()
	res, err := s.Append(context.Background(), core.Append{Message: core.Message{
		Session: session, Role: core.RoleUser, Mime: core.MimeMarkdown, Content: text,
	}})
	if err != nil {
		tb.Fatalf("Append %q: %v", text, err)
	}
	return res.Message
}

func ids(ms []core.Message) []core.MessageID {
	out := make([]core.MessageID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func contents(ms []core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

// checkIncreasing fails unless ids are valid and strictly increasing.
func checkIncreasing(tb testing.TB, ids []core.MessageID) {
	tb.Helper()
	for i, id := range ids {
		if !core.ValidID(string(id)) {
			tb.Fatalf("id %d %q is not a valid id", i, id)
		}
		if i > 0 && ids[i-1] >= id {
			tb.Fatalf("id %d %q is not after id %d %q", i, id, i-1, ids[i-1])
		}
	}
}
