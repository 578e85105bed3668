package bolt

import (
	"context"
	"testing"

	"github.com/parley-chat/parley/core"
)

func TestDeduped(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	ctx := context.Background()
	sess := createSession(t, s, core.Session{Title: "d"})
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
