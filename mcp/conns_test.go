package mcp

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

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

// A notification carries at most maxBatchBytes of content, unless one
// message alone is larger.
func TestBatchSize(t *testing.T) {
	big := wireMsg{size: 40 << 10}
	small := wireMsg{size: 2}
	for _, tc := range []struct {
		msgs []wireMsg
		want int
	}{
		{[]wireMsg{big, big, big}, 1},
		{[]wireMsg{small, big, big}, 2},
		{[]wireMsg{{size: 100 << 10}, small}, 1},
		{make([]wireMsg, 40), maxBatch},
	} {
		if got := batchSize(tc.msgs); got != tc.want {
			t.Errorf("batchSize(%d messages) = %d, want %d", len(tc.msgs), got, tc.want)
		}
	}
}
