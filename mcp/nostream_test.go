package mcp

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestRegistryWaitsForStream: a subscriber whose consumer (its GET
// stream) is not there keeps its notifications, messages and all and in
// order, and its consumer sends them in one round as soon as it starts.
func TestRegistryWaitsForStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRegistry(time.Millisecond, testLogger())
		defer r.close()
		f := newFakeSender(t)
		r.add("k", f.wake, "u", "")
		r.publish("A", msg(1))
		r.publish("A", msg(2))
		f.none(t)
		r.publish("A", msg(3))
		f.none(t)
		start := time.Now()
		f.consume(t, r, "k")
		if n := f.next(t); fmt.Sprint(contents(n.msgs)) != "[1 2 3]" || n.at != start {
			t.Fatalf("once the consumer came: %v at +%s, want [1 2 3] at once", contents(n.msgs), n.at.Sub(start))
		}
		f.none(t)
		if r.count() != 1 {
			t.Fatalf("count %d", r.count())
		}
	})
}

// TestNotificationWaitsForStream: a 2025-11-25 session's notification
// goes out on its GET stream only (mcp-go would hand it to whichever of the
// stream and the session's POSTs in flight took it first, and a POST whose
// request had ended dropped it). A person's message that arrives while the
// agent's GET stream is closed (a restarted daemon's client reopens it up
// to a second after initializing again) waits for the stream and arrives
// on it, however many POSTs the session makes meanwhile.
func TestNotificationWaitsForStream(t *testing.T) {
	p := newPipeStack(t)
	a := p.createSession("a")
	sid := p.agent(t, InboxURI)
	m := p.human(a, "while the stream is closed")
	for i := range 3 {
		code, _, body := p.post(t, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"chat_read_since","arguments":{}}}`, 10+i))
		if code != http.StatusOK || strings.Contains(body, "notifications/resources/updated") {
			t.Fatalf("a POST carried the notification (or failed): %d %s", code, body)
		}
	}
	updates := make(chan string, 4)
	p.read(t, sid, p.stream(t, sid), true, updates)
	select {
	case u := <-updates:
		if !strings.Contains(u, string(m.ID)) || !strings.Contains(u, "while the stream is closed") {
			t.Fatalf("update %s, want message %s", u, m.ID)
		}
	case <-time.After(waitFor):
		t.Fatal("no notifications/resources/updated on the GET stream")
	}
}
