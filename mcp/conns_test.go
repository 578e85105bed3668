package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/parley-chat/parley/mcp/internal/pipenet"
)

// pipeStack is a stack served over pipes, with a raw HTTP client.
type pipeStack struct {
	*stack
	hc *http.Client
}

func newPipeStack(t *testing.T) *pipeStack {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	st := newStack(t, t.TempDir(), stackOptions{handler: &h})
	l := pipenet.NewListener()
	hs := &http.Server{Handler: *h.Load()}
	served := make(chan struct{})
	go func() { defer close(served); _ = hs.Serve(l) }()
	tr := &http.Transport{DialContext: l.Dial}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		st.close()
		_ = hs.Close()
		<-served
	})
	return &pipeStack{stack: st, hc: &http.Client{Transport: tr}}
}

// post sends one JSON-RPC message of MCP session sid ("" for none) and
// returns the HTTP status, the session id it got and the body.
func (p *pipeStack) post(t *testing.T, sid, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://parley/mcp", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set(headerSessionID, sid)
		req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(headerSessionID), string(b)
}

// agent initializes an MCP session and subscribes it to uri.
func (p *pipeStack) agent(t *testing.T, uri string) string {
	t.Helper()
	code, sid, body := p.post(t, "", initLine)
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", code, sid, body)
	}
	p.post(t, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if code, _, body := p.post(t, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`); code != http.StatusOK || strings.Contains(body, "error") {
		t.Fatalf("subscribe: %d %s", code, body)
	}
	return sid
}

// stream opens session sid's GET stream.
func (p *pipeStack) stream(t *testing.T, sid string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://parley/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(headerSessionID, sid)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := p.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	return resp
}

// read reads the stream's messages until it ends, answering pings when
// answer is set, and passes on the resource updates.
func (p *pipeStack) read(t *testing.T, sid string, resp *http.Response, answer bool, updates chan<- string) (ended chan struct{}) {
	ended = make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var m struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			_ = json.Unmarshal([]byte(data), &m)
			switch {
			case m.Method == "ping" && answer:
				p.post(t, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{}}`, m.ID))
			case m.Method == "notifications/resources/updated" && updates != nil:
				updates <- data
			}
		}
	}()
	return ended
}

// subscribed reports whether MCP session sid still has subscriptions.
func (s *Server) subscribed(sid string) bool {
	s.subs.mu.RLock()
	defer s.subs.mu.RUnlock()
	return s.subs.subs[sid] != nil
}

// A GET stream whose client reads and answers the pings stays; one whose
// client reads but never answers, or never reads at all, is cut off
// within staleAfter+staleCheck (or the write timeout) and its session
// ended, subscriptions and all.
func TestStalledStreamsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStack(t)
		id := p.createSession("s")
		uri := SessionInboxURI(id)

		good, mute, deaf := p.agent(t, uri), p.agent(t, uri), p.agent(t, uri)
		updates := make(chan string, 16)
		goodEnded := p.read(t, good, p.stream(t, good), true, updates)
		muteEnded := p.read(t, mute, p.stream(t, mute), false, nil)
		deafStream := p.stream(t, deaf) // never read
		start := time.Now()

		// deaf keeps its session busy with requests, so only the write
		// deadline can tell that it does not read.
		stopBusy := make(chan struct{})
		busyDone := make(chan struct{})
		go func() {
			defer close(busyDone)
			for {
				select {
				case <-stopBusy:
					return
				case <-time.After(3 * time.Second):
					p.post(t, deaf, `{"jsonrpc":"2.0","id":9,"method":"ping"}`)
				}
			}
		}()

		select {
		case <-muteEnded:
		case <-time.After(time.Minute):
			t.Fatal("a stream that never answers pings is still open after a minute")
		}
		if d := time.Since(start); d > staleAfter+staleCheck {
			t.Errorf("the unanswering stream was cut after %s, want at most %s", d, staleAfter+staleCheck)
		}
		synctest.Wait()
		if p.srv.subscribed(mute) {
			t.Error("the unanswering stream's session still has its subscription")
		}
		if code, _, _ := p.post(t, mute, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`); code != http.StatusNotFound {
			t.Errorf("the cut-off session answers %d, want 404 (initialize again)", code)
		}

		// The deaf stream blocks on its first heartbeat and fails at the
		// write deadline.
		time.Sleep(heartbeat + writeTimeout + time.Second - time.Since(start))
		synctest.Wait()
		if p.srv.subscribed(deaf) {
			t.Errorf("the stream that is not read is still subscribed after %s", time.Since(start))
		}
		close(stopBusy)
		<-busyDone
		deafStream.Body.Close()

		// The good one stays, and hears.
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if !p.srv.subscribed(good) || !p.srv.AgentStatus().Listening(id) {
			t.Fatal("the stream that reads and answers was dropped")
		}
		p.human(id, "still there?")
		select {
		case u := <-updates:
			if !strings.Contains(u, "still there?") {
				t.Fatalf("update %s", u)
			}
		case <-time.After(time.Second):
			t.Fatal("the good stream got no notification")
		}
		select {
		case <-goodEnded:
			t.Fatal("the good stream ended")
		default:
		}
	})
}

// A GET stream of no session, or of an id that never initialized, has
// nobody to answer its pings and is cut off too.
func TestStrayStreamsCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStack(t)
		for _, sid := range []string{"", "made-up"} {
			req, err := http.NewRequest(http.MethodGet, "http://parley/mcp", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", "text/event-stream")
			if sid != "" {
				req.Header.Set(headerSessionID, sid)
			}
			resp, err := p.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			ended := p.read(t, sid, resp, false, nil)
			select {
			case <-ended:
			case <-time.After(time.Minute):
				t.Fatalf("stream of session %q still open after a minute", sid)
			}
			if d := time.Since(start); d > staleAfter+staleCheck {
				t.Errorf("stream of session %q cut after %s", sid, d)
			}
		}
		if n := len(p.srv.conns.sessions); n != 0 {
			t.Errorf("%d sessions tracked for ids that never initialized", n)
		}
	})
}

// An agent that exits without DELETE stops counting as listening within
// presenceWindow, and the page's watchers are told.
func TestPresenceEndsWhenClientGoes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeStack(t)
		id := p.createSession("s")
		sid := p.agent(t, SessionInboxURI(id))
		resp := p.stream(t, sid)
		ended := p.read(t, sid, resp, true, nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if !p.srv.AgentStatus().Listening(id) {
			t.Fatal("a connected agent does not count as listening")
		}
		changed := p.srv.PresenceChanged()
		resp.Body.Close() // the process exits: its stream closes, no DELETE
		<-ended
		gone := time.Now()
		select {
		case <-changed:
		case <-time.After(2 * time.Minute):
			t.Fatal("presence watchers were never told")
		}
		for p.srv.AgentStatus().Listening(id) {
			select {
			case <-p.srv.PresenceChanged():
			case <-time.After(2 * time.Minute):
				t.Fatal("still listening")
			}
		}
		if d := time.Since(gone); d > 60*time.Second {
			t.Errorf("listening for %s after the client went, want at most 60s", d)
		}
		// It listens again as soon as it is back.
		p.post(t, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
		if !p.srv.AgentStatus().Listening(id) {
			t.Error("a request does not bring presence back")
		}
	})
}

// Past [mcp] max_sessions, initialize is refused with a JSON-RPC error
// naming the key; a session that ends makes room.
func TestMaxSessions(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{maxSessions: 2})
	a := mustDial(t, st.url, connOptions{})
	mustDial(t, st.url, connOptions{})
	_, err := dial(t, st.url, connOptions{})
	if err == nil || !strings.Contains(err.Error(), "too many MCP sessions (2, the most [mcp] max_sessions allows)") ||
		!strings.Contains(err.Error(), "PARLEY_MCP_MAX_SESSIONS") {
		t.Fatalf("a third session: %v", err)
	}
	// 2026-07-28 has no sessions; its listen streams count instead.
	m := mustDial(t, st.url, connOptions{modern: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	errs := make(chan error, 1)
	_, err = m.ListenAsync(ctx, mcp.SubscriptionFilter{ResourceSubscriptions: []string{InboxURI}}, func(err error) { errs <- err })
	if err == nil {
		select {
		case err = <-errs:
		case <-ctx.Done():
		}
	}
	if err == nil || !strings.Contains(err.Error(), "max_sessions") {
		t.Fatalf("a listen stream past the bound: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(waitFor)
	for {
		if _, err := dial(t, st.url, connOptions{}); err == nil {
			break
		}
		select {
		case <-deadline:
			t.Fatal("no room after a session ended")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A notification carries at most maxBatchBytes of content, unless one
// message alone is larger.
func TestBatchSize(t *testing.T) {
	big := InboxMessage{Content: string(bytes.Repeat([]byte("x"), 40<<10))}
	small := InboxMessage{Content: "hi"}
	for _, tc := range []struct {
		msgs []InboxMessage
		want int
	}{
		{[]InboxMessage{big, big, big}, 1},
		{[]InboxMessage{small, big, big}, 2},
		{[]InboxMessage{{Content: string(bytes.Repeat([]byte("x"), 100<<10))}, small}, 1},
		{make([]InboxMessage, 40), maxBatch},
	} {
		if got := batchSize(tc.msgs); got != tc.want {
			t.Errorf("batchSize(%d messages) = %d, want %d", len(tc.msgs), got, tc.want)
		}
	}
}
