package bolt

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

func TestLedger(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	s, path := openTemp(t, Options{Now: clk.Now})
	t0 := clk.Now()
	ref := func(adapter core.AdapterName, chat, thread, id string) core.MessageRef {
		return core.MessageRef{Adapter: adapter, Place: core.Place{Chat: chat, Thread: thread}, ID: id}
	}
	r1 := ref("telegram", "-100", "7", "1")
	r2 := ref("telegram", "-100", "7", "2")
	r3 := ref("slack", "C1", "17.1", "17.2")
	r4 := ref("telegram", "-100", "71", "x") // never added
	// Would be r1's key if the parts were simply concatenated.
	r5 := ref("telegram", "-10", "07", "1")

	steps := []struct {
		name    string
		add     []core.CleanupEntry
		remove  []core.MessageRef
		session core.SessionID
		want    []core.CleanupEntry
	}{
		{
			name: "add, listed oldest first",
			add: []core.CleanupEntry{
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
				{Session: "a", Ref: r1, Lifetime: core.LifetimeNextInput, Others: true, Created: t0.Add(time.Second)},
				{Session: "b", Ref: r3, Lifetime: core.LifetimeTurnComplete},
				{Session: "b", Ref: r5, Lifetime: core.LifetimeNextNotice, Created: t0.Add(3 * time.Second)},
			},
			session: "a",
			want: []core.CleanupEntry{
				{Session: "a", Ref: r1, Lifetime: core.LifetimeNextInput, Others: true, Created: t0.Add(time.Second)},
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
			},
		},
		{
			name:    "all sessions",
			session: "",
			want: []core.CleanupEntry{
				{Session: "b", Ref: r3, Lifetime: core.LifetimeTurnComplete, Created: t0},
				{Session: "a", Ref: r1, Lifetime: core.LifetimeNextInput, Others: true, Created: t0.Add(time.Second)},
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
				{Session: "b", Ref: r5, Lifetime: core.LifetimeNextNotice, Created: t0.Add(3 * time.Second)},
			},
		},
		{
			name:    "replace the row of a ref",
			add:     []core.CleanupEntry{{Session: "a", Ref: r1, Lifetime: core.LifetimeTurnComplete, Created: t0.Add(5 * time.Second)}},
			session: "a",
			want: []core.CleanupEntry{
				{Session: "a", Ref: r2, Lifetime: core.LifetimeNextNotice, Created: t0.Add(2 * time.Second)},
				{Session: "a", Ref: r1, Lifetime: core.LifetimeTurnComplete, Created: t0.Add(5 * time.Second)},
			},
		},
		{
			name:    "remove, missing rows are no error",
			remove:  []core.MessageRef{r2, r4, ref("matrix", "!room", "", "$ev")},
			session: "a",
			want: []core.CleanupEntry{
				{Session: "a", Ref: r1, Lifetime: core.LifetimeTurnComplete, Created: t0.Add(5 * time.Second)},
			},
		},
		{
			name:    "unknown session",
			session: "c",
			want:    []core.CleanupEntry{},
		},
	}
	for _, st := range steps {
		if err := s.AddCleanup(ctx, st.add...); err != nil {
			t.Fatalf("%s: AddCleanup: %v", st.name, err)
		}
		if err := s.RemoveCleanup(ctx, st.remove...); err != nil {
			t.Fatalf("%s: RemoveCleanup: %v", st.name, err)
		}
		got, err := s.Cleanup(ctx, st.session)
		if err != nil {
			t.Fatalf("%s: Cleanup: %v", st.name, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Errorf("%s: Cleanup(%q) =\n%+v\nwant\n%+v", st.name, st.session, got, st.want)
		}
	}

	if err := s.AddCleanup(ctx, core.CleanupEntry{Session: "a"}); err == nil {
		t.Errorf("AddCleanup of a row without a message id succeeded")
	}

	// Rows survive a restart.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{NoSync: true})
	if got, err := s.Cleanup(ctx, "b"); err != nil || len(got) != 2 {
		t.Errorf("after reopen Cleanup(b) = %+v, %v", got, err)
	}
}

func TestCursors(t *testing.T) {
	ctx := context.Background()
	s, path := openTemp(t, Options{})
	steps := []struct {
		set, name, value string
		want             string
	}{
		{name: "telegram", want: ""},
		{set: "telegram", value: "1001", name: "telegram", want: "1001"},
		{set: "telegram", value: "1002", name: "telegram", want: "1002"},
		{set: "matrix", value: "s72_1", name: "telegram", want: "1002"},
		{name: "matrix", want: "s72_1"},
		{set: "matrix", value: "", name: "matrix", want: ""},
	}
	for _, st := range steps {
		if st.set != "" {
			if err := s.SetCursor(ctx, st.set, st.value); err != nil {
				t.Fatalf("SetCursor(%q, %q): %v", st.set, st.value, err)
			}
		}
		if got, err := s.Cursor(ctx, st.name); err != nil || got != st.want {
			t.Errorf("Cursor(%q) = %q, %v; want %q", st.name, got, err, st.want)
		}
	}
	if err := s.SetCursor(ctx, "", "x"); err == nil {
		t.Errorf("SetCursor with an empty name succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{NoSync: true})
	if got, _ := s.Cursor(ctx, "telegram"); got != "1002" {
		t.Errorf("after reopen Cursor(telegram) = %q", got)
	}
}
