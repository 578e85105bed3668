package web

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
	"github.com/parley-chat/parley/store/bolt"
)

func TestUpdateLogIsBounded(t *testing.T) {
	s := newStates(nil, 1, slog.New(slog.DiscardHandler))
	big := strings.Repeat("x", 64<<10)
	for seq := uint64(1); seq <= 3*uiLogSize; seq++ {
		u := uistate.UIUpdate{Seq: seq}
		if seq%2 == 0 {
			u.Items = []uistate.UIItem{{ID: "output:0", Content: big}}
		}
		s.record(seq, u)
		if len(s.uis) > uiLogSize || s.uiBytes > uiLogBytes+len(big)+512 {
			t.Fatalf("at %d: %d updates, %d bytes", seq, len(s.uis), s.uiBytes)
		}
	}
	last := uint64(3 * uiLogSize)
	if u, ok := s.update(last); !ok || u.Seq != last {
		t.Fatalf("newest update missing")
	}
	if _, ok := s.update(1); ok {
		t.Fatalf("oldest update kept")
	}
	if len(s.uiQueue)-s.uiHead != len(s.uis) {
		t.Fatalf("queue %d, map %d", len(s.uiQueue)-s.uiHead, len(s.uis))
	}
}

// An EventResync (the cluster feed fell behind the event log: events will
// not come) drops every cached state, so the next read builds it from the
// store with what the feed missed.
func TestResyncDropsStates(t *testing.T) {
	ctx := context.Background()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "parley.db"), bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := commands.New(ctx, st, core.NewMemBus(0), commands.Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := svc.Handle(ctx, core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: "a"})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Session
	write := func(text string) {
		t.Helper()
		if _, err := svc.Handle(ctx, core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: text}); err != nil {
			t.Fatal(err)
		}
	}
	items := func(s *states) int {
		t.Helper()
		ui, err := s.get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return len(ui.Items)
	}
	s := newStates(st, 10, slog.New(slog.DiscardHandler))
	write("one")
	before := items(s)
	write("two") // its event never reaches the states
	if n := items(s); n != before {
		t.Fatalf("the cached state changed without its event: %d items, then %d", before, n)
	}
	last, err := st.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.apply(core.Event{Seq: last, Kind: core.EventResync})
	if n := items(s); n != before+1 {
		t.Errorf("after a resync the state has %d items, want %d (the missed message read from the store)", n, before+1)
	}
}
