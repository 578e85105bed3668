package mcp

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/parley-chat/parley/core"
)

// session.list pages newest first and follows its cursors to the end; its
// arguments are checked before anything is read.
func TestSessionListPages(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	c := mustDial(t, st.url, connOptions{})
	var newest []core.SessionID
	for i := range 7 {
		s, _, err := st.store.CreateSession(context.Background(), core.Session{Title: fmt.Sprint(i),
			Status: []core.Status{core.StatusIdle, core.StatusClosed}[i%2]})
		if err != nil {
			t.Fatal(err)
		}
		newest = append([]core.SessionID{s.ID}, newest...)
	}
	type page struct {
		Sessions []sessionInfo `json:"sessions"`
		Next     string        `json:"next"`
	}
	walk := func(args map[string]any) (ids []core.SessionID, sizes []int) {
		t.Helper()
		for {
			var p page
			c.ok(t, "session.list", args, &p)
			sizes = append(sizes, len(p.Sessions))
			for _, s := range p.Sessions {
				ids = append(ids, s.ID)
			}
			if p.Next == "" {
				return ids, sizes
			}
			args["cursor"] = p.Next
		}
	}
	if ids, sizes := walk(map[string]any{"limit": 3}); !slices.Equal(ids, newest) || !slices.Equal(sizes, []int{3, 3, 1}) {
		t.Errorf("limit 3: %v in pages %v, want %v", ids, sizes, newest)
	}
	if ids, sizes := walk(map[string]any{}); !slices.Equal(ids, newest) || !slices.Equal(sizes, []int{7}) {
		t.Errorf("default: %v in pages %v", ids, sizes)
	}
	closed := []core.SessionID{newest[1], newest[3], newest[5]}
	if ids, _ := walk(map[string]any{"status": "closed", "limit": 2}); !slices.Equal(ids, closed) {
		t.Errorf("closed: %v, want %v", ids, closed)
	}
	c.fails(t, "session.list", map[string]any{"limit": 1001}, "limit 1001 is not from 1 to 1000")
	c.fails(t, "session.list", map[string]any{"cursor": "x"}, `cursor "x" is not one session.list gave`)
	c.fails(t, "session.list", map[string]any{"status": "done"}, `status "done" is not one of idle, working, waiting, closed`)
	c.fails(t, "session.list", map[string]any{"page": 2}, "page")
}
