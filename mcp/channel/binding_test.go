package channel_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/channel"
)

// TestBoundToOneSession: a channel of session A pushes A's messages only,
// and its replies go to A only.
func TestBoundToOneSession(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	a := d.createSession("A")
	b := d.createSession("B")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: a})
	d.human(b, "for B")
	d.human(a, "for A")
	d.human(b, "for B again")
	got := cl.expect("for A")
	if got[0].Meta["session_id"] != string(a) {
		t.Fatalf("event of session %s", got[0].Meta["session_id"])
	}
	if text, failed := cl.reply(map[string]any{"text": "answer"}); failed {
		t.Fatal(text)
	}
	for _, m := range d.inbox(b) {
		if m.Role != core.RoleUser {
			t.Fatalf("session B got %+v", m)
		}
	}
	if d.watermark(b) != "" {
		t.Fatal("the channel of A kept state in B")
	}
}

// TestFirstRunSkipsHistory: bound to a session with history and no
// watermark, the channel pushes what people wrote after the agent side's
// last message, not the whole history.
func TestFirstRunSkipsHistory(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("old")
	d.human(id, "old question")
	d.assistant(id, "old answer")
	d.human(id, "unanswered")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id})
	cl.expect("unanswered")
}

// TestControlAndFiles: /cancel and /close reach Claude as control events;
// attachments are named by their paths.
func TestControlAndFiles(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("control")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id})
	ctx := context.Background()
	if _, err := d.svc.Handle(ctx, core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: "see this",
		Attachments: []core.Attachment{{Name: "a.png", Mime: "image/png", Size: 3, Path: "/tmp/a.png"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.svc.Handle(ctx, core.Command{Kind: core.Cancel, Session: id, Origin: core.OriginAPI}); err != nil {
		t.Fatal(err)
	}
	files := cl.next()
	if !strings.Contains(files.Content, "see this") || !strings.Contains(files.Content, "/tmp/a.png") {
		t.Fatalf("event %q does not name the file", files.Content)
	}
	if e := cl.next(); e.Content != "/cancel" || e.Meta["kind"] != "control" {
		t.Fatalf("event %+v, want /cancel as control", e)
	}
	if _, err := d.svc.Handle(ctx, core.Command{Kind: core.Close, Session: id, Origin: core.OriginAPI}); err != nil {
		t.Fatal(err)
	}
	if e := cl.next(); e.Content != "/close" || e.Meta["kind"] != "control" {
		t.Fatalf("event %+v, want /close as control", e)
	}
	if text, failed := cl.reply(map[string]any{"text": "late"}); !failed || !strings.Contains(text, "closed") {
		t.Fatalf("reply to a closed session: %q (failed %v)", text, failed)
	}
}

// TestUnknownSession: --session naming no session ends the channel with the
// daemon's reason.
func TestUnknownSession(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	in, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	err := channel.Serve(ctx, channel.Options{URL: d.url(), Session: "01JZZZZZZZZZZZZZZZZZZZZZZZ", Logger: testLogger(), Resync: time.Second}, in, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "unknown session") {
		t.Fatalf("Serve = %v, want an error naming the unknown session", err)
	}
}
