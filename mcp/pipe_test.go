package mcp

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/parley-chat/parley/mcp/internal/pipenet"
)

// pipeStack is a stack served over pipes, with a raw HTTP client.
type pipeStack struct {
	*stack
	hc *http.Client
}

func newPipeStack(t *testing.T) *pipeStack { t.Helper(); return newPipeStackWith(t, stackOptions{}) }

// newPipeStackWith is newPipeStack with options (handler is its own).
func newPipeStackWith(t *testing.T, o stackOptions) *pipeStack {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	o.handler = &h
	st := newStack(t, t.TempDir(), o)
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
	return p.postWith(t, "", nil, sid, body)
}

// postWith is post to /mcp?query with headers.
func (p *pipeStack) postWith(t *testing.T, query string, headers map[string]string, sid, body string) (int, string, string) {
	t.Helper()
	url := "http://parley/mcp"
	if query != "" {
		url += "?" + query
	}
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
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
