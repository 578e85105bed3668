package modeltest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Reply is one scripted answer of the model: the content of one assistant
// message (text blocks and tool calls), streamed in order.
type Reply struct {
	Blocks []Block
	// Status, when not zero, answers this request with the API's error of
	// that HTTP status instead (see Fail).
	Status int
}

// Block is one part of a Reply: a text block streamed in Chunks (with
// Pause before each chunk but the first), or a tool call.
type Block struct {
	Chunks []string
	Pause  time.Duration
	Tool   *ToolCall
	// Wait, when set, holds the stream before this block until it is
	// closed (or the client goes away): a test holds the model mid-answer
	// exactly where it needs it, with everything before already sent.
	Wait <-chan struct{}
}

// ToolCall is a tool call of the model: Name with Input (marshalled as
// JSON). An empty ID is filled in.
type ToolCall struct {
	ID    string
	Name  string
	Input any
	// Namespace qualifies Name for a tool the client declared inside a
	// namespace (the Responses API's namespace tools: Codex puts each MCP
	// server's tools in namespace mcp__SERVER). The Messages API has no
	// namespaces: the Messages fake fails the test that sets it.
	Namespace string
}

// Text is a text block streamed in one piece.
func Text(s string) Block { return Block{Chunks: []string{s}} }

// Chunks is a text block streamed in the given pieces, with pause before
// each piece but the first.
func Chunks(pause time.Duration, pieces ...string) Block {
	return Block{Chunks: pieces, Pause: pause}
}

// Tool is a tool call of name with input (marshalled as JSON).
func Tool(name string, input any) Block { return Block{Tool: &ToolCall{Name: name, Input: input}} }

// wait holds a block until its Wait is closed; false when ctx ended first.
func (b Block) wait(ctx context.Context) bool {
	if b.Wait == nil {
		return true
	}
	select {
	case <-b.Wait:
		return true
	case <-ctx.Done():
		return false
	}
}

// pause sleeps before chunk j of the block; false when ctx ended first.
func (b Block) pause(ctx context.Context, j int) bool {
	if j == 0 || b.Pause <= 0 {
		return true
	}
	select {
	case <-time.After(b.Pause):
		return true
	case <-ctx.Done():
		return false
	}
}

// Received is what every recorded request has, whatever its API.
type Received struct {
	// Time is when the request arrived, before its body was read: with the
	// fake's answer immediate, it is where a benchmark splits a turn's
	// time between the client's side before the model and after it.
	Time   time.Time
	Method string
	Path   string // without the query
	Header http.Header
	Body   []byte
}

func received(r *http.Request, at time.Time, body []byte) Received {
	return Received{Time: at, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
}

// request is a decoded request of either API: it knows whether it is a
// turn of the agent's main loop, the only requests that take the script.
type request interface{ main() bool }

// fake is what both fakes share: a loopback server, the script, the
// failure switch and the record of requests (of type R).
type fake[R request] struct {
	// URL is the server's root, http://127.0.0.1:PORT; the APIs live
	// under /v1.
	URL string

	tb  testing.TB
	srv *httptest.Server

	mu       sync.Mutex
	script   []Reply
	fail     int
	requests []R
	changed  chan struct{} // closed and replaced when a request is recorded
	n        int
}

func (f *fake[R]) start(tb testing.TB, h http.HandlerFunc) {
	f.tb = tb
	f.changed = make(chan struct{})
	f.srv = httptest.NewServer(h)
	f.URL = f.srv.URL
	tb.Cleanup(f.Close)
}

// Close stops the server; streams still open are cut.
func (f *fake[R]) Close() {
	f.srv.CloseClientConnections()
	f.srv.Close()
}

// Script queues replies for the next requests of the main conversation,
// in order; side requests never take them. A request with nothing queued
// is answered with the text "OK".
func (f *fake[R]) Script(replies ...Reply) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.script = append(f.script, replies...)
}

// Say queues one reply made of blocks; Say(Text("hi")) answers "hi".
func (f *fake[R]) Say(blocks ...Block) { f.Script(Reply{Blocks: blocks}) }

// Fail makes every following request fail with the API's error for
// status; 0 ends that.
func (f *fake[R]) Fail(status int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = status
}

// Requests returns every request received so far, in order.
func (f *fake[R]) Requests() []R {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]R(nil), f.requests...)
}

// WaitRequests waits until at least n requests were received, or ctx ends.
func (f *fake[R]) WaitRequests(ctx context.Context, n int) ([]R, error) {
	for {
		f.mu.Lock()
		got, ch := len(f.requests), f.changed
		f.mu.Unlock()
		if got >= n {
			return f.Requests(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return f.Requests(), fmt.Errorf("modeltest: %d of %d requests: %w", got, n, ctx.Err())
		}
	}
}

// ModelRequests returns the requests of the agent's main loop (streamed,
// with tools), without side requests.
func (f *fake[R]) ModelRequests() []R {
	var out []R
	for _, r := range f.Requests() {
		if r.main() {
			out = append(out, r)
		}
	}
	return out
}

// record keeps req and, for a request of the main loop, takes the next
// scripted reply. It returns the reply, the request's number (from 1) and
// the failure status in force.
func (f *fake[R]) record(req R) (Reply, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	close(f.changed)
	f.changed = make(chan struct{})
	f.n++
	var reply Reply
	if req.main() && len(f.script) > 0 {
		reply, f.script = f.script[0], f.script[1:]
	}
	return reply, f.n, f.fail
}

// startSSE answers with a stream of server-sent events and returns the
// function that writes one (event: and data: lines, flushed at once). It
// returns false once the client went away.
func startSSE(ctx context.Context, w http.ResponseWriter) func(event string, data any) bool {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	return func(event string, data any) bool {
		var b bytes.Buffer
		fmt.Fprintf(&b, "event: %s\ndata: ", event)
		json.NewEncoder(&b).Encode(data) // ends the data line with \n
		b.WriteString("\n")
		if _, err := w.Write(b.Bytes()); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return ctx.Err() == nil
	}
}
