// Package claudetest runs the Claude Code CLI in tests: a fake Anthropic
// Messages API it can talk to offline, and helpers that find the installed
// CLI and give it an environment of its own.
//
// The fake models Anthropic's API as Claude Code 2.1.328 uses it, not
// parley: streaming POST /v1/messages?beta=true answered with the SSE
// events Anthropic sends (message_start, content_block_start/delta/stop,
// ping, message_delta, message_stop), token counting, and Anthropic's error
// bodies. Tests script the model's answers in order (text in chunks with
// pauses, tool_use blocks) and read back every request, so they see what
// the model was sent: earlier turns after --resume, tool results, the
// message a denial gave the model.
package claudetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// API is a fake Anthropic Messages API on 127.0.0.1.
type API struct {
	// URL is the base URL to give the CLI as ANTHROPIC_BASE_URL.
	URL string

	srv *httptest.Server

	mu       sync.Mutex
	script   []Reply
	fail     int
	requests []Request
	changed  chan struct{} // closed and replaced when a request is recorded
	n        int
}

// Reply is one scripted answer of the model: the content blocks of one
// assistant message, streamed in order.
type Reply struct {
	Blocks []Block
	// Status, when not zero, answers this request with Anthropic's error
	// of that HTTP status instead (see API.Fail).
	Status int
}

// Block is one content block of a Reply: a text block streamed in Chunks
// (with Pause before each chunk but the first), or a tool_use block.
type Block struct {
	Chunks []string
	Pause  time.Duration
	Tool   *ToolCall
}

// ToolCall is a tool_use block: the model calls Name with Input. An empty
// ID is filled in (toolu_…).
type ToolCall struct {
	ID    string
	Name  string
	Input any
}

// Text is a text block streamed in one piece.
func Text(s string) Block { return Block{Chunks: []string{s}} }

// Chunks is a text block streamed in the given pieces, with pause before
// each piece but the first.
func Chunks(pause time.Duration, pieces ...string) Block {
	return Block{Chunks: pieces, Pause: pause}
}

// Tool is a tool_use block calling name with input (marshalled as JSON).
func Tool(name string, input any) Block { return Block{Tool: &ToolCall{Name: name, Input: input}} }

// Bash is a tool_use block running command with Claude Code's Bash tool.
func Bash(command, description string) Block {
	return Tool("Bash", map[string]string{"command": command, "description": description})
}

// Request is one request the fake received, decoded.
type Request struct {
	// Time is when the request arrived, before its body was read: with the
	// fake's answer immediate, it is where a benchmark splits a turn's
	// time between the client's side before the model and after it.
	Time   time.Time
	Method string
	Path   string // without the query
	Header http.Header
	Body   []byte
	Model  string
	Stream bool
	// Tools counts the tool definitions sent: Claude Code's main loop
	// sends its tools with every turn, its side requests (titles,
	// summaries) none.
	Tools int
	// Messages are the conversation the model was sent, in order.
	Messages []Message
}

// main says whether r is a turn of the main conversation.
func (r Request) main() bool { return r.Path == "/v1/messages" && r.Stream && r.Tools > 0 }

// Message is one message of a request's conversation. A string content is
// decoded as one text block.
type Message struct {
	Role    string
	Content []Content
}

// Content is one content block of a request's message: text, tool_use or
// tool_result (then Text is the result's text, flattened).
type Content struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
}

// Texts returns the text of every text block and tool result the request's
// messages of role hold, in order.
func (r Request) Texts(role string) []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role != role {
			continue
		}
		for _, c := range m.Content {
			if (c.Type == "text" || c.Type == "tool_result") && c.Text != "" {
				out = append(out, c.Text)
			}
		}
	}
	return out
}

// ToolResults returns the request's tool_result blocks, in order.
func (r Request) ToolResults() []Content {
	var out []Content
	for _, m := range r.Messages {
		for _, c := range m.Content {
			if c.Type == "tool_result" {
				out = append(out, c)
			}
		}
	}
	return out
}

// NewAPI starts a fake API for the test; it is closed when the test ends.
func NewAPI(tb testing.TB) *API {
	tb.Helper()
	a := &API{changed: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	a.URL = a.srv.URL
	tb.Cleanup(a.Close)
	return a
}

// Close stops the server; streams still open are cut.
func (a *API) Close() {
	a.srv.CloseClientConnections()
	a.srv.Close()
}

// Script queues replies for the next requests of the main conversation,
// in order; side requests never take them. A request with nothing queued
// is answered with the text "OK".
func (a *API) Script(replies ...Reply) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.script = append(a.script, replies...)
}

// Say queues one reply made of blocks; Say(Text("hi")) answers "hi".
func (a *API) Say(blocks ...Block) { a.Script(Reply{Blocks: blocks}) }

// Fail makes every following request fail with Anthropic's error for
// status (401 authentication_error, 403 permission_error, 429
// rate_limit_error, 500 api_error, 529 overloaded_error); 0 ends that.
func (a *API) Fail(status int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fail = status
}

// Requests returns every request received so far, in order.
func (a *API) Requests() []Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Request(nil), a.requests...)
}

// ModelRequests returns the requests of the main conversation (streaming
// /v1/messages with tools), without side requests.
func (a *API) ModelRequests() []Request {
	var out []Request
	for _, r := range a.Requests() {
		if r.main() {
			out = append(out, r)
		}
	}
	return out
}

// WaitRequests waits until at least n requests were received, or ctx ends.
func (a *API) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		a.mu.Lock()
		got, ch := len(a.requests), a.changed
		a.mu.Unlock()
		if got >= n {
			return a.Requests(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return a.Requests(), fmt.Errorf("claudetest: %d of %d requests: %w", got, n, ctx.Err())
		}
	}
}

func (a *API) record(r *http.Request, at time.Time, body []byte) (Request, Reply, int) {
	req := Request{Time: at, Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	var wire struct {
		Model    string            `json:"model"`
		Stream   bool              `json:"stream"`
		Tools    []json.RawMessage `json:"tools"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &wire) == nil {
		req.Model, req.Stream, req.Tools = wire.Model, wire.Stream, len(wire.Tools)
		for _, m := range wire.Messages {
			req.Messages = append(req.Messages, Message{Role: m.Role, Content: decodeContent(m.Content)})
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, req)
	close(a.changed)
	a.changed = make(chan struct{})
	a.n++
	var reply Reply
	if req.main() && len(a.script) > 0 {
		reply, a.script = a.script[0], a.script[1:]
	}
	return req, reply, a.n
}

// decodeContent reads a message's content: a string, or blocks whose
// tool_result content is itself a string or text blocks.
func decodeContent(raw json.RawMessage) []Content {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Content{{Type: "text", Text: s}}
	}
	var blocks []struct {
		Content
		Inner json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return nil
	}
	out := make([]Content, 0, len(blocks))
	for _, b := range blocks {
		c := b.Content
		if c.Type == "tool_result" && len(b.Inner) > 0 {
			var parts []string
			for _, in := range decodeContent(b.Inner) {
				parts = append(parts, in.Text)
			}
			c.Text = strings.Join(parts, "\n")
		}
		out = append(out, c)
	}
	return out
}

func (a *API) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	req, reply, n := a.record(r, at, body)
	w.Header().Set("request-id", fmt.Sprintf("req_fake%06d", n))
	a.mu.Lock()
	fail := a.fail
	a.mu.Unlock()
	switch {
	case r.Header.Get("x-api-key") != APIKey && r.Header.Get("Authorization") != "Bearer "+APIKey:
		writeError(w, http.StatusUnauthorized, n)
	case fail != 0:
		writeError(w, fail, n)
	case reply.Status != 0:
		writeError(w, reply.Status, n)
	case r.Method != http.MethodPost:
		writeError(w, http.StatusNotFound, n)
	case req.Path == "/v1/messages/count_tokens":
		writeJSON(w, map[string]int{"input_tokens": len(body) / 4})
	case req.Path != "/v1/messages":
		writeError(w, http.StatusNotFound, n)
	case !req.Stream:
		// A side request Claude Code makes outside the main loop (a title,
		// a summary) is served by a short answer.
		writeJSON(w, message(n, req.Model, []any{map[string]string{"type": "text", "text": "OK"}}, "end_turn"))
	default:
		if len(reply.Blocks) == 0 {
			reply.Blocks = []Block{Text("OK")}
		}
		stream(r.Context(), w, n, req.Model, reply.Blocks)
	}
}

// errorTypes are Anthropic's error types by HTTP status.
var errorTypes = map[int][2]string{
	400: {"invalid_request_error", "invalid request"},
	401: {"authentication_error", "invalid x-api-key"},
	403: {"permission_error", "Your API key does not have permission to use the specified resource."},
	404: {"not_found_error", "Not found"},
	413: {"request_too_large", "Request exceeds the maximum allowed number of bytes."},
	429: {"rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"},
	500: {"api_error", "Internal server error"},
	529: {"overloaded_error", "Overloaded"},
}

func writeError(w http.ResponseWriter, status, n int) {
	e, ok := errorTypes[status]
	if !ok {
		e = [2]string{"api_error", http.StatusText(status)}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": e[0], "message": e[1]},
		"request_id": fmt.Sprintf("req_fake%06d", n),
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func message(n int, model string, content []any, stop any) map[string]any {
	return map[string]any{
		"id": fmt.Sprintf("msg_fake%06d", n), "type": "message", "role": "assistant", "model": model,
		"content": content, "stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]int{"input_tokens": 10, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}
}

// stream writes blocks as Anthropic's SSE stream. It returns early when
// the client goes away (an interrupted turn closes its connection).
func stream(ctx context.Context, w http.ResponseWriter, n int, model string, blocks []Block) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(event string, data any) bool {
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
	if !send("message_start", map[string]any{"type": "message_start", "message": message(n, model, []any{}, nil)}) {
		return
	}
	stop := "end_turn"
	tools := 0
	// Anthropic sends one ping after the first content_block_start.
	start := func(i int, block any) bool {
		return send("content_block_start", map[string]any{"type": "content_block_start", "index": i, "content_block": block}) &&
			(i > 0 || send("ping", map[string]string{"type": "ping"}))
	}
	for i, blk := range blocks {
		if blk.Tool != nil {
			stop = "tool_use"
			tools++
			id := blk.Tool.ID
			if id == "" {
				id = fmt.Sprintf("toolu_fake%06d_%d", n, tools)
			}
			input, _ := json.Marshal(blk.Tool.Input)
			if !start(i, map[string]any{"type": "tool_use", "id": id, "name": blk.Tool.Name, "input": map[string]any{}}) {
				return
			}
			// Anthropic streams tool input as partial JSON: split it in two
			// so the client has to put it together.
			half := len(input) / 2
			for _, part := range []string{string(input[:half]), string(input[half:])} {
				if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "input_json_delta", "partial_json": part}}) {
					return
				}
			}
		} else {
			if !start(i, map[string]string{"type": "text", "text": ""}) {
				return
			}
			for j, c := range blk.Chunks {
				if j > 0 && blk.Pause > 0 {
					select {
					case <-time.After(blk.Pause):
					case <-ctx.Done():
						return
					}
				}
				if !send("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]string{"type": "text_delta", "text": c}}) {
					return
				}
			}
		}
		if !send("content_block_stop", map[string]any{"type": "content_block_stop", "index": i}) {
			return
		}
	}
	if !send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 5}}) {
		return
	}
	send("message_stop", map[string]string{"type": "message_stop"})
}
