package delivery

import (
	"github.com/parley-chat/parley/core"
)

// Lengths as the platform counts them. An adapter that is a Measurer
// measures rendered markdown itself; the others count the markdown in their
// LengthUnit. Split and Tail work on the markdown, so for a Measurer the
// budget they are given is narrowed until every piece fits once rendered:
// a rendering that adds markup (or removes it) is accounted for by
// measuring, not by a hand-proven bound on growth.

// measureTries bounds how often a budget is narrowed; each try cuts it in
// proportion to the worst overshoot, so two or three tries are the rule.
const measureTries = 8

// measure is md's length on a, after rendering when a is a Measurer.
func measure(a core.Adapter, md string) int {
	if m, ok := a.(core.Measurer); ok {
		return m.RenderedLength(md)
	}
	return Measure(md, a.Capabilities().LengthUnit)
}

// split cuts md into pieces that each fit a's MaxLength once rendered.
func split(a core.Adapter, md string) []string {
	c := a.Capabilities()
	budget := c.MaxLength
	var parts []string
	for range measureTries {
		parts = Split(md, budget, c.LengthUnit)
		worst := 0
		for _, p := range parts {
			worst = max(worst, measure(a, p))
		}
		if worst <= c.MaxLength {
			return parts
		}
		budget = narrow(budget, c.MaxLength, worst)
	}
	return parts
}

// tail is the live view of md on a: its end, behind marker, fitting a's
// MaxLength once rendered.
func tail(a core.Adapter, md, marker string) string {
	c := a.Capabilities()
	budget := c.MaxLength
	var t string
	for range measureTries {
		t = Tail(md, budget, c.LengthUnit, marker)
		n := measure(a, t)
		if n <= c.MaxLength {
			return t
		}
		budget = narrow(budget, c.MaxLength, n)
	}
	return t
}

// narrow scales budget down by how far got overshot limit, with a margin,
// and by at least one unit so that the loop always progresses.
func narrow(budget, limit, got int) int {
	next := int(int64(budget) * int64(limit) * 95 / (int64(got) * 100))
	return max(min(next, budget-1), 1)
}

// chunks splits text to the adapter's length limit.
func chunks(a core.Adapter, text string) []string {
	c := a.Capabilities()
	if c.MaxLength <= 0 || measure(a, text) <= c.MaxLength {
		return []string{text}
	}
	return split(a, text)
}
