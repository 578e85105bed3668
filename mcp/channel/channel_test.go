package channel_test

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/channel"
)

// TestDelivers: a channel without --session creates one; each message
// people write arrives once, in order, as a channel event with the meta
// Claude Code turns into tag attributes; the agent side's own messages do
// not; the watermark is kept after each.
func TestDelivers(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	ids := make(chan core.SessionID, 1)
	cl := startChannel(t, channel.Options{URL: d.url(), Title: "from claude", OnSession: func(id core.SessionID) { ids <- id }})
	if cl.proto != mcp.LATEST_LEGACY_PROTOCOL_VERSION {
		t.Fatalf("negotiated %s: Claude Code registers channel events only on an initialize-era connection", cl.proto)
	}
	id := sessionOf(t, ids)
	if got := d.session(id).Title; got != "from claude" {
		t.Fatalf("title %q", got)
	}
	m1 := d.human(id, "hello")
	d.assistant(id, "from another agent")
	m2 := d.human(id, "second")
	got := cl.expect("hello", "second")
	for i, m := range []core.Message{m1, m2} {
		want := map[string]string{"session_id": string(id), "message_id": string(m.ID), "origin": "api", "author": "Ada",
			"ts": m.Time.UTC().Format(time.RFC3339), "kind": "message"}
		for k, v := range want {
			if got[i].Meta[k] != v {
				t.Errorf("event %d meta %s = %q, want %q (all: %v)", i, k, got[i].Meta[k], v, got[i].Meta)
			}
		}
		for k := range got[i].Meta {
			if !metaKey(k) {
				t.Errorf("meta key %q would be dropped by Claude Code", k)
			}
		}
	}
	d.waitWatermark(id, m2.ID)
}

// metaKey is Claude Code's rule for meta keys: ^[a-zA-Z_][a-zA-Z0-9_]*$.
func metaKey(k string) bool {
	for i, r := range k {
		switch {
		case r == '_', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && r >= '0' && r <= '9':
		default:
			return false
		}
	}
	return k != ""
}
