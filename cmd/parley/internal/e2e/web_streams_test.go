package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The bounds of the daemon's HTTP server as a client meets them, on the
// fake clock (the stack on bubbleNet): a refused request is answered and
// closed at once, an accepted body that trickles is cut off at 10 s on
// every route, and a stream that is read lives on past every deadline.

// rawExchange is what a client that writes its request by hand saw of one
// connection, on the bubble's clock from when it sent the request.
type rawExchange struct {
	status int
	answer time.Duration // -1: none
	closed time.Duration // when the daemon closed the connection
}

// rawPost sends a POST to path of the stack's daemon with Host host (the
// daemon's address when empty) and header (lines ending in \r\n),
// declaring a body of length bytes and sending parts, gap apart, and
// reports what the client saw once the daemon closed the connection.
func (st *stack) rawPost(path, host, header string, length int, gap time.Duration, parts ...string) <-chan rawExchange {
	st.t.Helper()
	conn, err := st.net.Host().DialContext(context.Background(), "tcp", st.m.Addr())
	if err != nil {
		st.t.Fatal(err)
	}
	start := time.Now()
	got := make(chan rawExchange, 1)
	go func() {
		defer conn.Close()
		ex := rawExchange{answer: -1}
		br := bufio.NewReader(conn)
		if resp, err := http.ReadResponse(br, nil); err == nil {
			ex.status, ex.answer = resp.StatusCode, time.Since(start)
			_, _ = io.Copy(io.Discard, resp.Body)
		}
		_, _ = io.Copy(io.Discard, br)
		ex.closed = time.Since(start)
		got <- ex
	}()
	go func() {
		if host == "" {
			host = st.m.Addr()
		}
		head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\n\r\n", path, host, header, length)
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		for i, p := range parts {
			if i > 0 {
				time.Sleep(gap)
			}
			if _, err := io.WriteString(conn, p); err != nil {
				return
			}
		}
	}()
	return got
}

// TestWebRefusalsClosedAtOnce: 200 requests the daemon refuses — a
// foreign Host, which is how a DNS rebinding page reaches it, to /api/chat
// and /mcp, no token, cross-site — each declaring a body of 1000 bytes and
// sending 500, are answered at once and closed within a second (half a
// second for the client to read the answer before a reset might drop it).
// Before, each was held for as long as its client cared to keep it, and
// one without the token was not even answered.
func TestWebRefusalsClosedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t)
		st.net = bubbleNet(t)
		st.noAgent = true
		const token = "0123456789abcdef"
		st.cfg.HTTP.Token = token
		st.start()
		const json, auth = "Content-Type: application/json\r\n", "Authorization: Bearer " + token + "\r\n"
		kinds := []struct {
			name, path, host, header string
			status                   int
		}{
			{"foreign Host", "/api/chat", "evil.example", json + auth, http.StatusForbidden},
			{"foreign Host on /mcp", "/mcp", "evil.example", json + auth, http.StatusForbidden},
			{"no token", "/api/chat", "", json, http.StatusUnauthorized},
			{"cross-site", "/api/chat", "", "Sec-Fetch-Site: cross-site\r\n" + json + auth, http.StatusForbidden},
		}
		const n = 200
		got := make([]<-chan rawExchange, n)
		for i := range n {
			k := kinds[i%len(kinds)]
			got[i] = st.rawPost(k.path, k.host, k.header, 1000, 0, strings.Repeat("x", 500))
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for i := range n {
			k := kinds[i%len(kinds)]
			select {
			case ex := <-got[i]:
				if ex.status != k.status || ex.answer != 0 || ex.closed > time.Second {
					t.Errorf("request %d (%s): status %d after %v, closed after %v; want %d at once, closed within 1s",
						i, k.name, ex.status, ex.answer, ex.closed, k.status)
				}
			default:
				t.Errorf("request %d (%s): its connection is still open after 10s", i, k.name)
			}
		}
	})
}

// TestWebSlowBodiesCut: an accepted request whose body trickles (a byte
// every 4 s: the last would come at 12 s) is answered and its connection
// closed at 10 s, on every route: /api and /mcp, which read the body
// first, and the page and /metrics, which answer without reading it (and
// net/http then waited for the body, with no deadline). A body that
// arrives within the 10 s is served.
func TestWebSlowBodiesCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t)
		st.net = bubbleNet(t)
		st.noAgent = true
		st.start()
		const json = "Content-Type: application/json\r\n"
		slow := []string{"01234", "5", "6", "7", "8"}
		tests := []struct {
			name, path, header string
			parts              []string
			status             int
		}{
			{"/api/chat", "/api/chat", json, slow, http.StatusRequestTimeout},
			{"/mcp", "/mcp", json, slow, http.StatusRequestTimeout},
			{"the page", "/", json, slow, http.StatusMethodNotAllowed},
			{"/metrics", "/metrics", json, slow, http.StatusOK},
			// Connection: close, so that its connection does not stay for
			// the next request.
			{"a body in time", "/api/sessions", json + "Connection: close\r\n", []string{`{"title":`, `"a"}`}, http.StatusCreated},
		}
		got := make([]<-chan rawExchange, len(tests))
		for i, tt := range tests {
			length := 10
			if tt.status == http.StatusCreated {
				length = len(strings.Join(tt.parts, ""))
			}
			got[i] = st.rawPost(tt.path, "", tt.header, length, 4*time.Second, tt.parts...)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		for i, tt := range tests {
			select {
			case ex := <-got[i]:
				if ex.status != tt.status || ex.closed > 11*time.Second {
					t.Errorf("%s: status %d after %v, closed after %v; want %d, closed by 10s (and a second to read the answer)",
						tt.name, ex.status, ex.answer, ex.closed, tt.status)
				}
				if tt.status == http.StatusCreated && ex.answer != 4*time.Second {
					t.Errorf("%s: answered after %v, want when the body arrived, at 4s", tt.name, ex.answer)
				} else if tt.status != http.StatusCreated && ex.answer != 10*time.Second {
					t.Errorf("%s: answered after %v, want at 10s", tt.name, ex.answer)
				}
			default:
				t.Errorf("%s: its connection is still open after a minute", tt.name)
			}
		}
	})
}

// TestWebStreamOutlivesDeadlines: a client that reads /api/events, and
// reconnects with Last-Event-ID whenever a stream ends as EventSource
// does, reads for half an hour — past the body deadline, the write
// deadline, the idle and header timeouts and many heartbeats — and gets
// every message posted meanwhile, each as it is posted. Each stream lasts
// exactly its 25 s lifetime, and gets its heartbeat. The agent's MCP
// stream, open as long, still brings it the news.
func TestWebStreamOutlivesDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t)
		st.net = bubbleNet(t)
		st.start()
		base := "http://" + st.m.Addr()
		post := func(path, body string) map[string]any {
			t.Helper()
			resp, err := st.client().Post(base+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
				t.Fatalf("POST %s: %d %v %v", path, resp.StatusCode, out, err)
			}
			return out
		}
		session := post("/api/sessions", `{"title":"long"}`)["id"].(string)

		ctx, cancel := context.WithCancel(context.Background())
		messages, pings := make(chan string, 100), make(chan struct{}, 1000)
		lasted := make(chan time.Duration, 1000) // each stream's life
		done := make(chan struct{})
		defer func() { cancel(); <-done }()
		go func() {
			defer close(done)
			lastID := ""
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/events?ui=delta", nil)
				if lastID != "" {
					req.Header.Set("Last-Event-ID", lastID)
				}
				began := time.Now()
				resp, err := st.client().Do(req)
				if err != nil {
					return
				}
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1<<16), 1<<20)
				for sc.Scan() {
					switch line := sc.Text(); {
					case line == ": ping":
						pings <- struct{}{}
					case strings.HasPrefix(line, "id: "):
						lastID = line[4:]
					case strings.HasPrefix(line, "data: ") && strings.Contains(line, `"kind":"human_message"`):
						messages <- line
					}
				}
				resp.Body.Close()
				if ctx.Err() == nil {
					lasted <- time.Since(began)
				}
				time.Sleep(time.Second) // the stream's retry:
			}
		}()

		const n = 16
		for i := range n {
			if i > 0 {
				time.Sleep(2 * time.Minute)
			}
			if i == n-1 {
				// The agent's news of the last message must come now.
				for len(st.agent.notes) > 0 {
					<-st.agent.notes
				}
			}
			text := fmt.Sprintf("message %d", i)
			post("/api/chat", fmt.Sprintf(`{"session_id":%q,"text":%q}`, session, text))
			select {
			case m := <-messages:
				if !strings.Contains(m, text) {
					t.Fatalf("got %s, want %q", m, text)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%q did not come on the stream", text)
			}
		}
		if r := st.heard(""); len(r.Messages) != n || r.Messages[n-1].Content != fmt.Sprintf("message %d", n-1) {
			t.Errorf("the agent read %+v, want the %d messages", r.Messages, n)
		}
		if len(lasted) < 60 {
			t.Errorf("%d streams in half an hour, want one every 26 s (25 s and the retry)", len(lasted))
		}
		for len(lasted) > 0 {
			if d := <-lasted; d != 25*time.Second {
				t.Errorf("a stream lasted %v, want its lifetime, 25 s", d)
			}
		}
		if len(pings) < 60 {
			t.Errorf("%d heartbeats in half an hour", len(pings))
		}
	})
}
