package modeltest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// AnthropicKey is the key the Messages fake accepts (as x-api-key or a
// bearer token); any other key is refused with Anthropic's 401.
const AnthropicKey = "sk-ant-parley-test-key"

// Messages is a fake Anthropic Messages API on 127.0.0.1: give its URL as
// the client's base URL (ANTHROPIC_BASE_URL; URL+"/v1" where the client
// wants the version in it, as OpenCode's baseURL does).
type Messages struct {
	fake[MessagesRequest]
}

// MessagesRequest is one request the Messages fake received, decoded.
type MessagesRequest struct {
	Received
	Model  string
	Stream bool
	// Tools counts the tool definitions sent: the main loop of Claude
	// Code and of OpenCode sends its tools with every turn, their side
	// requests (titles, summaries) none.
	Tools int
	// Messages are the conversation the model was sent, in order.
	Messages []Message
}

// main says whether r is a turn of the main conversation.
func (r MessagesRequest) main() bool { return r.Path == "/v1/messages" && r.Stream && r.Tools > 0 }

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
func (r MessagesRequest) Texts(role string) []string {
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
func (r MessagesRequest) ToolResults() []Content {
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

// NewMessages starts a fake Messages API for the test; it is closed when
// the test ends.
func NewMessages(tb testing.TB) *Messages {
	tb.Helper()
	m := &Messages{}
	m.start(tb, m.serve)
	return m
}

// decodeMessages reads a request's body; a body that is not a Messages
// request leaves the fields after Received empty.
func decodeMessages(r *http.Request, at time.Time, body []byte) MessagesRequest {
	req := MessagesRequest{Received: received(r, at, body)}
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
	return req
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

func (m *Messages) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	req := decodeMessages(r, at, body)
	reply, n, fail := m.record(req)
	w.Header().Set("request-id", fmt.Sprintf("req_fake%06d", n))
	switch {
	case r.Header.Get("x-api-key") != AnthropicKey && r.Header.Get("Authorization") != "Bearer "+AnthropicKey:
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
		// A side request made outside the main loop (a title, a summary)
		// is served by a short answer.
		writeJSON(w, message(n, req.Model, []any{map[string]string{"type": "text", "text": "OK"}}, "end_turn"))
	default:
		if len(reply.Blocks) == 0 {
			reply.Blocks = []Block{Text("OK")}
		}
		m.stream(r.Context(), w, n, req.Model, reply.Blocks)
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
func (m *Messages) stream(ctx context.Context, w http.ResponseWriter, n int, model string, blocks []Block) {
	send := startSSE(ctx, w)
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
		if !blk.wait(ctx) {
			return
		}
		if blk.Tool != nil {
			if blk.Tool.Namespace != "" {
				m.tb.Errorf("modeltest: the Messages API has no tool namespaces (tool %s in %s)", blk.Tool.Name, blk.Tool.Namespace)
			}
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
				if !blk.pause(ctx, j) {
					return
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
