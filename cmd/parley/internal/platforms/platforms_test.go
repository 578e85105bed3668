package platforms

import (
	"reflect"
	"slices"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
)

// TestPlatformTable checks the table: each platform of this build makes
// its section and has a constructor, and its section is the
// configuration's under its name; a platform this build lacks has neither
// and no section.
func TestPlatformTable(t *testing.T) {
	cfg, err := config.Load("", []string{"HOME=/home/ada"}, Known(All()))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[core.AdapterName]bool{}
	for _, p := range All() {
		if seen[p.Name] {
			t.Errorf("%s: two rows", p.Name)
		}
		seen[p.Name] = true
		s, inConfig := cfg.PlatformSection(string(p.Name))
		if p.Section == nil {
			if inConfig || p.New != nil {
				t.Errorf("%s: absent from this build, but has a section or a constructor", p.Name)
			}
			continue
		}
		if st := reflect.TypeOf(p.Section()); !inConfig || reflect.TypeOf(s) != st {
			t.Errorf("%s: section %v, the configuration's [%s] is %T", p.Name, st, p.Name, s)
		}
		if p.New == nil || p.Doc == "" || len(p.KeyDocs) == 0 {
			t.Errorf("%s: no constructor, or no descriptions for parley init's example", p.Name)
		}
	}
	got := Known(All())
	var names []string
	for _, p := range got.Present {
		names = append(names, string(p.Name))
	}
	if want := []string{"telegram", "slack", "matrix"}; !slices.Equal(names, want) || !slices.Equal(got.Absent, []string{"discord"}) {
		t.Errorf("Known = %q, absent %q; want %q, absent discord", names, got.Absent, want)
	}
}
