package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

const toolsList = `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`

// Sessions that initialize and then say nothing (no stream, no DELETE)
// cannot keep agents out: at [mcp] max_sessions the one idle longest is
// ended to make room, and an agent that connects then is admitted and
// hears what people write.
func TestSilentSessionsMakeRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStack(t) // DefaultMaxSessions
		const silent = 300
		sids := make([]string, silent)
		for i := range sids {
			code, sid, body := p.post(t, "", initLine)
			if code != http.StatusOK || sid == "" {
				t.Fatalf("silent session %d refused: %d %s", i, code, body)
			}
			sids[i] = sid
			time.Sleep(time.Millisecond) // each idle a little less than the one before
		}
		if n := p.srv.Agents(); n != DefaultMaxSessions {
			t.Fatalf("%d sessions open, want %d", n, DefaultMaxSessions)
		}
		// The longest idle were ended, the others kept.
		ended := silent - DefaultMaxSessions
		for i, sid := range sids {
			want := http.StatusOK
			if i < ended {
				want = http.StatusNotFound
			}
			if code, _, body := p.post(t, sid, toolsList); code != want {
				t.Fatalf("silent session %d answers %d %s, want %d", i, code, body, want)
			}
		}

		// An agent that connects now is admitted, and hears.
		id := p.createSession("s")
		sid := p.agent(t, SessionInboxURI(id))
		updates := make(chan string, 4)
		p.read(t, sid, p.stream(t, sid), true, updates)
		p.human(id, "anyone there?")
		select {
		case u := <-updates:
			if !strings.Contains(u, "anyone there?") {
				t.Fatalf("update %s", u)
			}
		case <-time.After(waitFor):
			t.Fatal("the new agent was not notified")
		}
	})
}

// A session with no request for idleTimeout and no stream ends (its
// client is told 404 and initializes again); one that makes a request now
// and then, or keeps its GET stream open and read, stays.
func TestIdleSessionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStack(t)
		id := p.createSession("s")
		quiet := p.agent(t, SessionInboxURI(id)) // subscribed, no stream
		busy := p.initWith(t, "", nil)
		listening := p.agent(t, InboxURI)
		p.read(t, listening, p.stream(t, listening), true, nil)
		start := time.Now()

		time.Sleep(50 * time.Second)
		if code, _, _ := p.post(t, busy, toolsList); code != http.StatusOK {
			t.Fatalf("the busy session answers %d after 50s", code)
		}
		time.Sleep(time.Until(start.Add(idleTimeout - time.Millisecond)))
		synctest.Wait()
		if n := p.srv.Agents(); n != 3 {
			t.Fatalf("%d sessions before the quiet one was idle 60s, want 3", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := p.srv.Agents(); n != 2 {
			t.Fatalf("%d sessions once the quiet one was idle 60s, want 2", n)
		}
		if code, _, _ := p.post(t, quiet, toolsList); code != http.StatusNotFound {
			t.Fatalf("the ended session answers %d, want 404", code)
		}
		if st := p.srv.AgentStatus(); st.Sessions[id] != 0 || st.All != 1 {
			t.Fatalf("presence %+v: the ended session still counts", st)
		}

		lastBusy := start.Add(50 * time.Second)
		for range 6 {
			time.Sleep(time.Until(lastBusy.Add(50 * time.Second)))
			if code, _, _ := p.post(t, busy, toolsList); code != http.StatusOK {
				t.Fatalf("the busy session answers %d after %s", code, time.Since(start))
			}
			lastBusy = time.Now()
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if code, _, _ := p.post(t, listening, toolsList); code != http.StatusOK {
			t.Fatalf("the listening session answers %d after %s", code, time.Since(start))
		}
	})
}

// The daemon's own client (the orchestrator, with OwnClientHeader's
// secret) is never the session ended to make room, however long it has
// been idle, and is admitted even when no session is idle; a client that
// only claims to be it is not.
func TestOwnClientNeverEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStackWith(t, stackOptions{maxSessions: 3})
		name, value := p.srv.OwnClientHeader()
		ownHeader := map[string]string{name: value}
		own := p.initWith(t, "", ownHeader)
		impostor := p.initWith(t, "", map[string]string{name: "guessed", "User-Agent": "parley-orchestrator"})
		time.Sleep(time.Second)
		for i := range 10 {
			if code, _, body := p.post(t, "", initLine); code != http.StatusOK {
				t.Fatalf("silent session %d refused: %d %s", i, code, body)
			}
			time.Sleep(time.Second)
		}
		if code, _, _ := p.postWith(t, "", ownHeader, own, toolsList); code != http.StatusOK {
			t.Fatalf("the own client's session answers %d: it was ended to make room", code)
		}
		if code, _, _ := p.post(t, impostor, toolsList); code != http.StatusNotFound {
			t.Fatalf("the impostor's session answers %d: it was kept", code)
		}

		// Every other place busy with a stream: a stranger is refused,
		// the own client admitted past the bound.
		for range 2 {
			sid := p.agent(t, InboxURI)
			p.read(t, sid, p.stream(t, sid), true, nil)
		}
		if code, _, body := p.post(t, "", initLine); code != http.StatusServiceUnavailable || !strings.Contains(body, "max_sessions") {
			t.Fatalf("a stranger at the bound with none idle: %d %s", code, body)
		}
		if code, _, body := p.postWith(t, "", ownHeader, "", initLine); code != http.StatusOK {
			t.Fatalf("the own client at the bound: %d %s", code, body)
		}
		if n := p.srv.Agents(); n != 4 {
			t.Fatalf("%d sessions, want 4", n)
		}
	})
}

// Past [mcp] max_sessions with no session idle, initialize and
// subscriptions/listen are refused with a JSON-RPC error naming the key —
// a listen whatever session header it carries, which a 2026-07-28 request
// has no use for; a session that ends makes room.
func TestMaxSessions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStackWith(t, stackOptions{maxSessions: 2})
		a := p.agent(t, InboxURI)
		aStream := p.stream(t, a)
		aEnded := p.read(t, a, aStream, true, nil)
		b := p.agent(t, InboxURI)
		p.read(t, b, p.stream(t, b), true, nil)
		code, _, body := p.post(t, "", initLine)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "too many MCP sessions (2, the most [mcp] max_sessions allows)") ||
			!strings.Contains(body, "PARLEY_MCP_MAX_SESSIONS") || !strings.Contains(body, `"error"`) {
			t.Fatalf("a third session: %d %s", code, body)
		}
		for _, h := range []map[string]string{nil, {headerSessionID: a}, {headerSessionID: "mcp-session-made-up"}} {
			tr, err := transport.NewStreamableHTTP("http://parley/mcp", transport.WithHTTPBasicClient(p.hc),
				transport.WithHTTPHeaders(h), transport.WithHTTPLogger(testLogger()))
			if err != nil {
				t.Fatal(err)
			}
			m, err := start(t, client.NewClient(tr), true)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), waitFor)
			errs := make(chan error, 1)
			stop, err := m.ListenAsync(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{InboxURI}}, func(err error) { errs <- err })
			if err == nil {
				select {
				case err = <-errs:
				case <-m.acks:
				case <-ctx.Done():
				}
				stop()
			}
			cancel()
			if err == nil || !strings.Contains(err.Error(), "max_sessions") {
				t.Fatalf("a listen stream past the bound, with headers %v: %v", h, err)
			}
		}
		// a goes: its stream closes and it sends DELETE.
		aStream.Body.Close()
		<-aEnded
		req, _ := http.NewRequest(http.MethodDelete, "http://parley/mcp", nil)
		req.Header.Set(headerSessionID, a)
		if resp, err := p.hc.Do(req); err != nil {
			t.Fatal(err)
		} else {
			resp.Body.Close()
		}
		if code, _, body := p.post(t, "", initLine); code != http.StatusOK {
			t.Fatalf("no room after a session ended: %d %s", code, body)
		}
	})
}

// A GET stream through a connection net/http cannot hand over (HTTP/2)
// runs in the handler, and carries notifications and pings the same way.
func TestStreamOverHTTP2(t *testing.T) {
	var h atomic.Pointer[http.Handler]
	st := newStack(t, t.TempDir(), stackOptions{handler: &h})
	hs := httptest.NewUnstartedServer(*h.Load())
	hs.EnableHTTP2 = true
	hs.StartTLS()
	t.Cleanup(hs.Close)
	if resp, err := hs.Client().Get(hs.URL + "/mcp"); err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("not HTTP/2: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	id := st.createSession("s")
	c := mustDial(t, hs.URL+"/mcp", connOptions{hc: hs.Client()})
	c.subscribe(t, SessionInboxURI(id))
	for i := range 3 {
		text := fmt.Sprintf("over HTTP/2 %d", i)
		st.human(id, text)
		if u := c.next(t); len(u.Messages) != 1 || u.Messages[0].Content != text {
			t.Fatalf("update %+v, want %q", u, text)
		}
	}
}

// A session has one GET stream: a second one ends the first, and the
// session's notifications go to the second.
func TestOneStreamPerSession(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStack(t)
		id := p.createSession("s")
		sid := p.agent(t, SessionInboxURI(id))
		first := p.read(t, sid, p.stream(t, sid), true, nil)
		updates := make(chan string, 4)
		p.read(t, sid, p.stream(t, sid), true, updates)
		select {
		case <-first:
		case <-time.After(waitFor):
			t.Fatal("the first stream is still open")
		}
		p.human(id, "to the second")
		select {
		case u := <-updates:
			if !strings.Contains(u, "to the second") {
				t.Fatalf("update %s", u)
			}
		case <-time.After(waitFor):
			t.Fatal("the second stream got no notification")
		}
	})
}

// Large messages arrive whole on the stream, batched within
// maxBatchBytes.
func TestLargeNotificationsOnStream(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	id := st.createSession("s")
	c := mustDial(t, st.url, connOptions{})
	c.subscribe(t, SessionInboxURI(id))
	want := map[string]bool{}
	for i := range 4 {
		text := fmt.Sprintf("%d %s", i, strings.Repeat("large ", 50<<10/6))
		want[text] = true
		st.human(id, text)
	}
	for len(want) > 0 {
		u := c.next(t)
		size := 0
		for _, m := range u.Messages {
			if !want[m.Content] {
				t.Fatalf("a message arrived damaged or twice (%d bytes)", len(m.Content))
			}
			delete(want, m.Content)
			size += len(m.Content)
		}
		if len(u.Messages) > 1 && size > maxBatchBytes {
			t.Fatalf("a notification of %d messages carries %d bytes", len(u.Messages), size)
		}
	}
}
