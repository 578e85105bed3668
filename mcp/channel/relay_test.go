package channel_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/channel"
)

// TestReply: the reply tool posts the assistant's message to the session
// (once) and ends the turn, so the session waits for people again.
func TestReply(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("reply")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id})
	d.human(id, "what is 6*7?")
	cl.expect("what is 6*7?")
	if st := d.session(id).Status; st != core.StatusWorking {
		t.Fatalf("status %s after the person wrote", st)
	}
	text, failed := cl.reply(map[string]any{"text": "**42**"})
	if failed || !strings.HasPrefix(text, "sent") {
		t.Fatalf("reply: %q (failed %v)", text, failed)
	}
	var replies []core.Message
	for _, m := range d.inbox(id) {
		if m.Role == core.RoleAssistant {
			replies = append(replies, m)
		}
	}
	if len(replies) != 1 || replies[0].Content != "**42**" || replies[0].Origin != core.OriginMCP {
		t.Fatalf("assistant messages %+v, want the one reply", replies)
	}
	if st := d.session(id).Status; st != core.StatusIdle {
		t.Fatalf("status %s after the reply, want %s (the turn ended)", st, core.StatusIdle)
	}
	if text, failed := cl.reply(map[string]any{"text": "  "}); !failed {
		t.Fatalf("an empty reply was sent: %s", text)
	}
	cl.none() // the reply is no event for Claude
}

// TestPermissionRelay: a permission prompt of Claude Code becomes an
// approval the session's people answer; the verdict goes back with the
// prompt's request_id: approve → allow, either deny → deny. The answers are
// not pushed as messages.
func TestPermissionRelay(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("approvals")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id})
	for i, tc := range []struct {
		option   int
		decision string
		behavior string
	}{
		{1, core.DecisionApprove, "allow"},
		{2, core.DecisionDenyContinue, "deny"},
		{3, core.DecisionDenyAbort, "deny"},
	} {
		rid := []string{"abcde", "fghij", "kmnop"}[i]
		cl.askPermission(rid, "Bash", "Create a file", `{"command":"touch f"}`)
		q := d.question(id)
		if !strings.Contains(q.Text, "Bash") || !strings.Contains(q.Text, "touch f") || strings.Contains(q.Text, `{"command"`) {
			t.Fatalf("the question %q does not say what is asked as people read it", q.Text)
		}
		d.answer(id, q, tc.option)
		if v := cl.verdict(); v.RequestID != rid || v.Behavior != tc.behavior {
			t.Fatalf("option %d: verdict %+v, want %s for %s", tc.option, v, tc.behavior, rid)
		}
		tools := d.session(id).Tools
		if got := tools[len(tools)-1]; got.Tool != "Bash" || got.Decision != tc.decision {
			t.Fatalf("the call is recorded as %+v, want decision %s", got, tc.decision)
		}
	}
	m := d.human(id, "thanks")
	got := cl.expect("thanks")
	if got[0].Meta["message_id"] != string(m.ID) {
		t.Fatalf("event %+v", got[0])
	}
}

// TestPermissionTimeout: nobody decides in time: Claude Code is told deny,
// never allow, and the question is withdrawn.
func TestPermissionTimeout(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("timeout")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id, ApprovalTimeout: 200 * time.Millisecond})
	cl.askPermission("qrstu", "Write", "Write notes.txt", `{"file_path":"notes.txt"}`)
	if v := cl.verdict(); v.RequestID != "qrstu" || v.Behavior != "deny" {
		t.Fatalf("verdict %+v, want deny", v)
	}
	if qs := d.session(id).Questions; len(qs) != 0 {
		t.Fatalf("questions still open: %+v", qs)
	}
}
