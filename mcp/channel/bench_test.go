package channel_test

import (
	"fmt"
	"testing"

	"github.com/parley-chat/parley/mcp/channel"
)

// BenchmarkDelivery measures a person's message to its channel event: the
// daemon's append, its notification, the channel's read and the event on
// stdout (the watermark save follows, before the next message is read).
//
//	go test -run '^$' -bench Delivery -benchtime 200x ./mcp/channel
func BenchmarkDelivery(b *testing.B) {
	d := startDaemon(b, b.TempDir(), "")
	id := d.createSession("bench")
	cl := startChannel(b, channel.Options{URL: d.url(), Session: id})
	b.ResetTimer()
	for i := range b.N {
		want := fmt.Sprint("message ", i)
		d.human(id, want)
		if e := cl.next(); e.Content != want {
			b.Fatalf("event %q, want %q", e.Content, want)
		}
	}
}

// BenchmarkReply measures the reply tool: Claude's call to the post in the
// session and the end of the turn, answered.
//
//	go test -run '^$' -bench Reply -benchtime 200x ./mcp/channel
func BenchmarkReply(b *testing.B) {
	d := startDaemon(b, b.TempDir(), "")
	id := d.createSession("bench")
	cl := startChannel(b, channel.Options{URL: d.url(), Session: id})
	b.ResetTimer()
	for i := range b.N {
		if text, failed := cl.reply(map[string]any{"text": fmt.Sprint("reply ", i)}); failed {
			b.Fatal(text)
		}
	}
}
