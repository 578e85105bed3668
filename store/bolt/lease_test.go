package bolt

import (
	"context"
	"testing"

	"github.com/parley-chat/parley/core"
)

// One process holds every lease of a bbolt store: granted at once to Hold,
// fenced writes are plain writes, and Leases lists what was acquired.
func TestLeases(t *testing.T) {
	ctx := context.Background()
	s, _ := openTemp(t, Options{NoSync: true, Instance: "me"})
	h, err := core.Hold(ctx, s, "telegram", core.HoldOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := h.Lease(); l.Token != 1 || l.Holder != "me" || l.Name != "telegram" {
		t.Errorf("lease = %+v", l)
	}
	if err := s.SetCursorFenced(ctx, "offset", "42", h.Lease()); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Cursor(ctx, "offset"); err != nil || v != "42" {
		t.Errorf("cursor = %q, %v", v, err)
	}
	if _, ok, err := s.AcquireLease(ctx, "matrix", core.LeaseTTL); !ok || err != nil {
		t.Errorf("Acquire = %v, %v", ok, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	infos, err := s.Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []core.LeaseInfo{
		{Lease: core.Lease{Name: "matrix", Holder: "me", Token: 1}, Mine: true, Held: true},
		{Lease: core.Lease{Name: "telegram", Token: 1}},
	}
	if len(infos) != len(want) || infos[0] != want[0] || infos[1] != want[1] {
		t.Errorf("Leases = %+v, want %+v", infos, want)
	}
	if _, ok, _ := s.AcquireLease(ctx, "telegram", core.LeaseTTL); !ok {
		t.Error("a released lease is not granted again")
	}
	if s.Instance() != "me" {
		t.Errorf("Instance = %q", s.Instance())
	}
}
