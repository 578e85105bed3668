package mcp

import (
	"context"
	"testing"

	"github.com/parley-chat/parley/core"
)

// TestKnownSessionsAreThoseAgentsNamed: sessions people create do not
// grow the server's cache of known sessions; a session an agent names is
// checked once and cached.
func TestKnownSessionsAreThoseAgentsNamed(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	ctx := context.Background()
	var ids []core.SessionID
	for range 50 {
		res, err := st.svc.Handle(ctx, core.Command{Kind: core.CreateSession, Origin: core.OriginAPI})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Session)
		// As Run hands it the bus's event, here synchronously.
		st.srv.handleEvent(ctx, core.Event{Kind: core.EventSessionCreated, Session: res.Session, Origin: core.OriginAPI})
	}
	count := func() int {
		n := 0
		st.srv.known.Range(func(any, any) bool { n++; return true })
		return n
	}
	if n := count(); n != 0 {
		t.Errorf("%d sessions cached after people created them, want 0", n)
	}
	if err := st.srv.checkSession(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Errorf("%d sessions cached after an agent named one, want 1", n)
	}
}
