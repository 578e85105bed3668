package web

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core/uistate"
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
