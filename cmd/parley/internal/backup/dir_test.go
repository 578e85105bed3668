package backup

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestListNewestPrune: only files named as parley names backups count,
// oldest first; one named in the future is not the newest; Prune keeps
// the newest and touches nothing else.
func TestListNewestPrune(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var want []string
	for _, d := range []time.Duration{-72 * time.Hour, -48 * time.Hour, -3 * time.Hour, -24 * time.Hour} {
		name := Name(now.Add(d))
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	future := Name(now.Add(240 * time.Hour))
	others := []string{"parley.db", "parley-2026.db", "notes.txt", future[:len(future)-3] + ".txt"}
	for _, n := range append(others, future) {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, Name(now.Add(-time.Hour))), 0o700); err != nil {
		t.Fatal(err)
	}
	list, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range list {
		want = append(want, filepath.Base(e.Path))
	}
	if !slices.Equal(want, []string{"parley-20261125T120000Z.db", "parley-20261126T120000Z.db", "parley-20261127T120000Z.db", "parley-20261128T090000Z.db", future}) {
		t.Fatalf("List: %q", want)
	}
	if e, ok := Newest(list, now); !ok || !e.Time.Equal(now.Add(-3*time.Hour)) {
		t.Errorf("Newest: %+v %v, want the one of 3 hours ago", e, ok)
	}
	if _, ok := Newest(nil, now); ok {
		t.Error("Newest of none")
	}
	gone, err := Prune(dir, 2)
	if err != nil || len(gone) != 3 {
		t.Fatalf("Prune: %q, %v", gone, err)
	}
	got := names(t, dir)
	for _, n := range append(others, future, "parley-20261128T090000Z.db", Name(now.Add(-time.Hour))) {
		if !slices.Contains(got, n) {
			t.Errorf("%s is gone", n)
		}
	}
	if len(got) != len(others)+3 {
		t.Errorf("left %q", got)
	}
	if l, err := List(filepath.Join(dir, "none")); err != nil || l != nil {
		t.Errorf("List of a missing directory: %v, %v", l, err)
	}
}
