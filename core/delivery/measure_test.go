package delivery

import (
	"context"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

// doubling renders every byte of markdown as two (a platform whose markup
// doubles the text), so cutting by source length would overflow.
type doubling struct{ max int }

func (doubling) Name() core.AdapterName { return "doubling" }
func (d doubling) Capabilities() core.Capabilities {
	return core.Capabilities{MaxLength: d.max, LengthUnit: core.Bytes}
}
func (doubling) Run(context.Context, core.Handler) error { return nil }
func (doubling) Send(context.Context, core.Place, core.OutMessage) (core.MessageRef, error) {
	return core.MessageRef{}, nil
}
func (doubling) RenderedLength(md string) int { return 2 * len(md) }

func TestSplitAndTailByRenderedLength(t *testing.T) {
	a := doubling{max: 100}
	var paras []string
	for range 20 {
		paras = append(paras, strings.Repeat("word ", 8))
	}
	md := strings.Join(paras, "\n\n")
	parts := split(a, md)
	if len(parts) < 2 {
		t.Fatalf("split into %d part(s)", len(parts))
	}
	var joined []string
	for i, p := range parts {
		if n := measure(a, p); n > a.max {
			t.Errorf("part %d renders to %d > %d", i, n, a.max)
		}
		joined = append(joined, strings.TrimSpace(p))
	}
	if got := strings.Join(joined, "\n\n"); strings.Fields(got) == nil || len(strings.Fields(got)) != len(strings.Fields(md)) {
		t.Errorf("the parts lost or added words: %d words, want %d", len(strings.Fields(got)), len(strings.Fields(md)))
	}
	if tl := tail(a, md, "…"); measure(a, tl) > a.max || !strings.HasSuffix(strings.TrimSpace(tl), "word") {
		t.Errorf("tail %q renders to %d (limit %d) or lost the end", tl, measure(a, tl), a.max)
	}
}
