package mcp

import (
	"slices"
	"testing"
)

// TestRestartReadSince: an agent that processed messages up to a watermark
// reads exactly the later ones after the daemon stopped and came back on
// the same data directory: none lost, none twice. (Stopping with kill -9
// is covered by the daemon's end-to-end tests; bbolt cannot be abandoned
// without Close inside one process.)
func TestRestartReadSince(t *testing.T) {
	dir := t.TempDir()
	st := newStack(t, dir, stackOptions{})
	a, b := st.createSession("a"), st.createSession("b")
	c := mustDial(t, st.url, connOptions{})
	for _, text := range []string{"one", "two", "three"} {
		st.human(a, text)
	}
	var read InboxPage
	c.ok(t, "chat_read_since", nil, &read)
	if got := contents(read.Messages); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("before the restart: %v", got)
	}
	watermark := read.LastID
	st.human(a, "four")
	st.assistant(a, "five")
	st.human(b, "six")
	st.close()

	st = newStack(t, dir, stackOptions{})
	st.human(a, "seven")
	for _, tc := range []struct {
		name string
		o    connOptions
		args map[string]any
		want []string
	}{
		{"all sessions", connOptions{}, nil, []string{"four", "five", "six", "seven"}},
		{"one session", connOptions{modern: true}, map[string]any{"session_id": string(a)}, []string{"four", "five", "seven"}},
		{"bound", connOptions{query: "session=" + string(b)}, nil, []string{"six"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustDial(t, st.url, tc.o)
			args := map[string]any{"after_id": string(watermark)}
			for k, v := range tc.args {
				args[k] = v
			}
			var read InboxPage
			c.ok(t, "chat_read_since", args, &read)
			if got := contents(read.Messages); !slices.Equal(got, tc.want) {
				t.Fatalf("after the restart: %v, want %v", got, tc.want)
			}
			for i, m := range read.Messages {
				if m.ID <= watermark || i > 0 && m.ID <= read.Messages[i-1].ID {
					t.Fatalf("ids not strictly after the watermark and increasing: %+v", read.Messages)
				}
			}
			if read.LastID != read.Messages[len(read.Messages)-1].ID {
				t.Fatalf("last_id %s", read.LastID)
			}
			// Read again from the new watermark: nothing twice.
			c.ok(t, "chat_read_since", map[string]any{"after_id": string(read.LastID), "session_id": args["session_id"]}, &read)
			if len(read.Messages) != 0 {
				t.Fatalf("read twice: %v", contents(read.Messages))
			}
		})
	}
}
