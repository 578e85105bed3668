package backup

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

// newDB writes a closed parley database at path with sessions sessions
// of one message each.
func newDB(tb testing.TB, path string, sessions int) {
	tb.Helper()
	s, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		tb.Fatal(err)
	}
	defer s.Close()
	fill(tb, s, sessions)
}

// fill adds sessions of one message each to s.
func fill(tb testing.TB, s *bolt.Store, sessions int) {
	tb.Helper()
	ctx := context.Background()
	for i := range sessions {
		sess, _, err := s.CreateSession(ctx, core.Session{Title: fmt.Sprint("session ", i)})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Role: core.RoleUser,
			Mime: core.MimeMarkdown, Content: fmt.Sprint("message ", i)}}); err != nil {
			tb.Fatal(err)
		}
	}
}

// names lists the names in dir.
func names(tb testing.TB, dir string) []string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// mustRead reads path.
func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
