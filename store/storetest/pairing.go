package storetest

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// testPairing: requests are kept by code, one per origin and actor, until
// deleted or approved; an approval becomes an admission in one step.
func testPairing(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	req := func(code string, origin core.Origin, actor string, created time.Time) core.PairingRequest {
		return core.PairingRequest{Code: code, Origin: origin, Actor: core.Actor{ID: actor, Name: "n" + actor},
			Place: core.Place{Chat: "c" + actor}, Created: created, Told: created}
	}
	codes := func() []string {
		t.Helper()
		rs, err := s.Pairings(ctx)
		Must(t, err)
		var out []string
		for _, r := range rs {
			out = append(out, r.Code)
		}
		return out
	}
	a := req("AAAA", "telegram", "1", t0.Add(2*time.Second))
	b := req("BBBB", "telegram", "2", t0.Add(time.Second))
	c := req("CCCC", "slack", "1", t0.Add(3*time.Second))
	for _, r := range []core.PairingRequest{a, b, c} {
		Must(t, s.PutPairing(ctx, r))
	}
	if got := codes(); !reflect.DeepEqual(got, []string{"BBBB", "AAAA", "CCCC"}) {
		t.Errorf("Pairings = %v, want oldest first", got)
	}
	rs, err := s.Pairings(ctx)
	Must(t, err)
	if !reflect.DeepEqual(rs[1], a) {
		t.Errorf("stored request %+v, want %+v", rs[1], a)
	}
	// A new code for the same person replaces the old request.
	a2 := req("DDDD", "telegram", "1", t0.Add(4*time.Second))
	Must(t, s.PutPairing(ctx, a2))
	if got := codes(); !reflect.DeepEqual(got, []string{"BBBB", "CCCC", "DDDD"}) {
		t.Errorf("after a new code: Pairings = %v", got)
	}
	if err := s.PutPairing(ctx, core.PairingRequest{Code: "EEEE", Origin: "telegram"}); !errors.Is(err, core.ErrInvalid) {
		t.Errorf("PutPairing without an actor: err = %v, want ErrInvalid", err)
	}

	if got, err := s.DeletePairing(ctx, "BBBB"); err != nil || !reflect.DeepEqual(got, b) {
		t.Errorf("DeletePairing = %+v, %v; want %+v", got, err, b)
	}
	if _, err := s.DeletePairing(ctx, "BBBB"); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("second DeletePairing: err = %v, want ErrNotFound", err)
	}
	at := t0.Add(time.Hour)
	adm, err := s.ApprovePairing(ctx, "DDDD", at)
	Must(t, err)
	want := core.Admission{Origin: "telegram", Actor: a2.Actor, Code: "DDDD", Approved: at}
	if !reflect.DeepEqual(adm, want) {
		t.Errorf("ApprovePairing = %+v, want %+v", adm, want)
	}
	if _, err := s.ApprovePairing(ctx, "DDDD", at); !errors.Is(err, core.ErrNotFound) {
		t.Errorf("second ApprovePairing: err = %v, want ErrNotFound", err)
	}
	if got := codes(); !reflect.DeepEqual(got, []string{"CCCC"}) {
		t.Errorf("after approval: Pairings = %v", got)
	}

	// Both survive a restart.
	Must(t, s.Close())
	s = again(t, Options{})
	adms, err := s.Admissions(ctx)
	Must(t, err)
	if len(adms) != 1 || !reflect.DeepEqual(adms[0], want) {
		t.Errorf("Admissions after reopen = %+v, want [%+v]", adms, want)
	}
	if got := codes(); !reflect.DeepEqual(got, []string{"CCCC"}) {
		t.Errorf("Pairings after reopen = %v", got)
	}
}

// testCheckAndClose: a sound store passes Check; Close may be called twice,
// refuses later writes and keeps what was written.
func testCheckAndClose(t *testing.T, e Engine) {
	ctx := context.Background()
	s, again := e.Open(t, Options{})
	sess := CreateSession(t, s, core.Session{Title: "kept"})
	AppendText(t, s, sess.ID, "hello")
	if err := s.Check(ctx); err != nil {
		t.Errorf("Check of a sound store: %v", err)
	}
	Must(t, s.Close())
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.SetCursor(ctx, "x", "y"); err == nil {
		t.Errorf("a write after Close succeeded")
	}
	if _, err := s.Append(ctx, core.Append{Message: core.Message{Session: sess.ID, Content: "late"}}); err == nil {
		t.Errorf("an Append after Close succeeded")
	}
	s = again(t, Options{})
	msgs, err := s.Inbox(ctx, sess.ID, "", 0)
	if err != nil || len(msgs) != 1 || msgs[0].Content != "hello" {
		t.Errorf("Inbox after reopen = %+v, %v", msgs, err)
	}
}
