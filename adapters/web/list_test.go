package web_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

type pageJSON struct {
	Sessions []sessionJSON `json:"sessions"`
	Next     string        `json:"next"`
}

// GET /api/sessions pages newest first, follows its cursors to the end
// without repeating or skipping a session, and filters by status.
func TestSessionsPaged(t *testing.T) {
	s := newStack(t)
	ctx := context.Background()
	var created []core.SessionID // oldest first
	for i := range 205 {
		sess, _, err := s.store.CreateSession(ctx, core.Session{Title: fmt.Sprint("s", i)})
		if err != nil {
			t.Fatal(err)
		}
		created = append(created, sess.ID)
	}
	for _, id := range created[:7] {
		s.handle(core.Command{Kind: core.Close, Origin: core.OriginAPI, Session: id})
	}
	newest := slices.Clone(created)
	slices.Reverse(newest)

	walk := func(query string) (ids []core.SessionID, sizes []int) {
		t.Helper()
		path := "/api/sessions" + query
		for {
			p := must[pageJSON](t, http.StatusOK)(s.get(path))
			sizes = append(sizes, len(p.Sessions))
			for _, ss := range p.Sessions {
				ids = append(ids, ss.ID)
			}
			if p.Next == "" {
				return ids, sizes
			}
			sep := "?"
			if query != "" {
				sep = "&"
			}
			path = "/api/sessions" + query + sep + "cursor=" + p.Next
		}
	}
	ids, sizes := walk("")
	if !slices.Equal(ids, newest) || !slices.Equal(sizes, []int{100, 100, 5}) {
		t.Errorf("default pages: sizes %v, %d sessions in order %v", sizes, len(ids), slices.Equal(ids, newest))
	}
	ids, sizes = walk("?limit=1000")
	if !slices.Equal(ids, newest) || !slices.Equal(sizes, []int{205}) {
		t.Errorf("limit=1000: sizes %v", sizes)
	}
	closed := slices.Clone(created[:7])
	slices.Reverse(closed)
	ids, sizes = walk("?status=closed&limit=3")
	if !slices.Equal(ids, closed) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Errorf("status=closed&limit=3: sizes %v, ids %v, want %v", sizes, ids, closed)
	}
	if ids, _ = walk("?status=idle&limit=1000"); len(ids) != 198 {
		t.Errorf("status=idle: %d sessions, want 198", len(ids))
	}

	for _, tt := range []struct{ query, want string }{
		{"?limit=0", `limit "0" is not a number from 1 to 1000`},
		{"?limit=1001", `limit "1001" is not a number from 1 to 1000`},
		{"?limit=ten", `limit "ten" is not a number from 1 to 1000`},
		{"?cursor=abc", `cursor "abc" is not one this API gave`},
		{"?status=done", `status "done" is not one of idle, working, waiting, closed`},
		{"?page=2", `unknown query parameter "page"`},
	} {
		got := must[struct{ Error string }](t, http.StatusBadRequest)(s.get("/api/sessions" + tt.query))
		if !strings.Contains(got.Error, tt.want) {
			t.Errorf("GET /api/sessions%s: %q, want %q", tt.query, got.Error, tt.want)
		}
	}
}
