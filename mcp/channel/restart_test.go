package channel_test

import (
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/channel"
)

// TestRestartChannel: Claude Code restarts the channel (a new process,
// bound with --session); the messages written while it was away arrive,
// each once, and none it had delivered arrives again.
func TestRestartChannel(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("restart")
	opts := channel.Options{URL: d.url(), Session: id}
	cl := startChannel(t, opts)
	d.human(id, "one")
	m2 := d.human(id, "two")
	cl.expect("one", "two")
	d.waitWatermark(id, m2.ID)
	cl.stop()

	d.human(id, "three")
	m4 := d.human(id, "four")
	cl = startChannel(t, opts)
	cl.expect("three", "four")
	d.waitWatermark(id, m4.ID)
	m5 := d.human(id, "five")
	cl.expect("five")
	d.waitWatermark(id, m5.ID)
}

// TestRestartDaemon: the daemon restarts under a running channel (its MCP
// session and subscription are gone); the channel notices, connects again,
// resumes after its watermark: the next message arrives once, the earlier
// ones not again, and the reply tool works on the new connection.
func TestRestartDaemon(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "")
	id := d.createSession("restart")
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id})
	m1 := d.human(id, "before")
	cl.expect("before")
	d.waitWatermark(id, m1.ID)

	d = d.restart()
	d.human(id, "after")
	d.human(id, "and more")
	cl.expect("after", "and more")
	if text, failed := cl.reply(map[string]any{"text": "back"}); failed {
		t.Fatalf("reply after the restart: %s", text)
	}
	ms := d.inbox(id)
	if last := ms[len(ms)-1]; last.Content != "back" {
		t.Fatalf("last message %+v, want the reply", last)
	}
}

// TestDaemonDownAtStart: the channel starts before the daemon; Claude Code
// gets its handshake at once, and the messages once the daemon is up.
func TestDaemonDownAtStart(t *testing.T) {
	dir := t.TempDir()
	d := startDaemon(t, dir, "")
	id := d.createSession("later")
	d.human(id, "waiting")
	d.stop()
	cl := startChannel(t, channel.Options{URL: d.url(), Session: id, ReplyPatience: 300 * time.Millisecond})
	if text, failed := cl.reply(map[string]any{"text": "too early"}); !failed || !strings.Contains(text, "connection refused") {
		t.Fatalf("reply with the daemon down: %q (failed %v), want a failure saying why", text, failed)
	}
	d = startDaemon(t, dir, d.addr)
	cl.expect("waiting")
}
