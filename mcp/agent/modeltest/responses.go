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

// OpenAIKey is the key the Responses fake accepts as its bearer token; any
// other key is refused with OpenAI's 401.
const OpenAIKey = "sk-parley-test-openai-key"

// Responses is a fake OpenAI Responses API on 127.0.0.1: give URL+"/v1" as
// the client's base URL (Codex's model_providers.NAME.base_url), which
// then posts to /v1/responses.
type Responses struct {
	fake[ResponsesRequest]
}

// NewResponses starts a fake Responses API for the test; it is closed when
// the test ends.
func NewResponses(tb testing.TB) *Responses {
	tb.Helper()
	r := &Responses{}
	r.start(tb, r.serve)
	return r
}

// ResponsesRequest is one request the Responses fake received, decoded.
type ResponsesRequest struct {
	Received
	Model  string
	Stream bool
	// Tools names the tools declared: a function or custom tool by its
	// name, each function of a namespace tool as NAMESPACE.NAME, a built-in
	// tool (web_search, …) by its type.
	Tools []string
	// Input is the conversation the model was sent, in order.
	Input []Item
}

// Item is one input item of a request: a message (Role and its text parts
// joined in Text), a function_call (Name, Namespace, CallID, Arguments) or
// a function_call_output (CallID, and Output flattened to its text); other
// types keep only Type.
type Item struct {
	Type      string
	Role      string
	Text      string
	Name      string
	Namespace string
	CallID    string
	Arguments string
	Output    string
}

// main says whether r is a turn of the main loop.
func (r ResponsesRequest) main() bool {
	return r.Path == "/v1/responses" && r.Stream && len(r.Tools) > 0
}

// Texts returns the text of every message of role, in order.
func (r ResponsesRequest) Texts(role string) []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "message" && it.Role == role && it.Text != "" {
			out = append(out, it.Text)
		}
	}
	return out
}

// Outputs returns the request's function_call_output items, in order.
func (r ResponsesRequest) Outputs() []Item {
	var out []Item
	for _, it := range r.Input {
		if it.Type == "function_call_output" {
			out = append(out, it)
		}
	}
	return out
}

// decodeResponses reads a request's body; a body that is not a Responses
// request leaves the fields after Received empty.
func decodeResponses(r *http.Request, at time.Time, body []byte) ResponsesRequest {
	req := ResponsesRequest{Received: received(r, at, body)}
	type tool struct {
		Type  string `json:"type"`
		Name  string `json:"name"`
		Tools []tool `json:"tools"`
	}
	var wire struct {
		Model  string          `json:"model"`
		Stream bool            `json:"stream"`
		Tools  []tool          `json:"tools"`
		Input  json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &wire) != nil {
		return req
	}
	req.Model, req.Stream = wire.Model, wire.Stream
	for _, t := range wire.Tools {
		switch {
		case t.Type == "namespace":
			for _, in := range t.Tools {
				req.Tools = append(req.Tools, t.Name+"."+in.Name)
			}
		case t.Name != "":
			req.Tools = append(req.Tools, t.Name)
		default:
			req.Tools = append(req.Tools, t.Type)
		}
	}
	req.Input = decodeInput(wire.Input)
	return req
}

// decodeInput reads a request's input: a string (one user message) or a
// list of items, where a message's content is a string or parts, and a
// function_call_output's output a string or content parts.
func decodeInput(raw json.RawMessage) []Item {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []Item{{Type: "message", Role: "user", Text: s}}
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		CallID    string          `json:"call_id"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil
	}
	out := make([]Item, 0, len(items))
	for _, it := range items {
		typ := it.Type
		if typ == "" && it.Role != "" {
			typ = "message" // the documented shorthand {role, content}
		}
		out = append(out, Item{Type: typ, Role: it.Role, Text: partsText(it.Content), Name: it.Name,
			Namespace: it.Namespace, CallID: it.CallID, Arguments: it.Arguments, Output: partsText(it.Output)})
	}
	return out
}

// partsText flattens a string or a list of content parts to their text.
func partsText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	var texts []string
	for _, p := range parts {
		if p.Text != "" {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}

func (f *Responses) serve(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	req := decodeResponses(r, at, body)
	reply, n, fail := f.record(req)
	w.Header().Set("x-request-id", fmt.Sprintf("req_fake%06d", n))
	switch {
	case r.Header.Get("Authorization") != "Bearer "+OpenAIKey:
		writeOpenAIError(w, http.StatusUnauthorized)
	case fail != 0:
		writeOpenAIError(w, fail)
	case reply.Status != 0:
		writeOpenAIError(w, reply.Status)
	case r.Method != http.MethodPost || req.Path != "/v1/responses":
		writeOpenAIError(w, http.StatusNotFound)
	case !req.Stream:
		// A request that does not stream is answered with the whole
		// response object; side requests get a short answer.
		if len(reply.Blocks) == 0 {
			reply.Blocks = []Block{Text("OK")}
		}
		out, _ := responseOutput(n, reply.Blocks)
		writeJSON(w, responseObject(n, req.Model, "completed", out))
	default:
		if len(reply.Blocks) == 0 {
			reply.Blocks = []Block{Text("OK")}
		}
		f.stream(r.Context(), w, n, req.Model, reply.Blocks)
	}
}

// openAIErrors are OpenAI's error type and code by HTTP status.
var openAIErrors = map[int][3]string{
	400: {"invalid_request_error", "", "Invalid request."},
	401: {"invalid_request_error", "invalid_api_key", "Incorrect API key provided."},
	403: {"invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported."},
	404: {"invalid_request_error", "", "Not found."},
	429: {"requests", "rate_limit_exceeded", "Rate limit reached for requests."},
	500: {"server_error", "", "The server had an error while processing your request."},
	503: {"server_error", "", "The engine is currently overloaded, please try again later."},
}

func writeOpenAIError(w http.ResponseWriter, status int) {
	e, ok := openAIErrors[status]
	if !ok {
		e = [3]string{"server_error", "", http.StatusText(status)}
	}
	var code any
	if e[1] != "" {
		code = e[1]
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": e[2], "type": e[0], "param": nil, "code": code},
	})
}

// responseObject is the Response object of request n, as
// response.created (in_progress, no output) or response.completed carry it.
func responseObject(n int, model, status string, output []any) map[string]any {
	resp := map[string]any{
		"id": fmt.Sprintf("resp_fake%06d", n), "object": "response", "created_at": time.Now().Unix(),
		"status": status, "model": model, "output": output, "error": nil, "incomplete_details": nil,
		"parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{}, "usage": nil,
	}
	if status == "completed" {
		resp["usage"] = map[string]any{
			"input_tokens": 10, "input_tokens_details": map[string]int{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]int{"reasoning_tokens": 0},
			"total_tokens": 15,
		}
	}
	return resp
}

// item ids are fixed by request number and output index, so the streamed
// and the completed output agree.
func messageID(n, i int) string  { return fmt.Sprintf("msg_fake%06d_%d", n, i) }
func callItemID(n, i int) string { return fmt.Sprintf("fc_fake%06d_%d", n, i) }

// callID is the call_id of tool call i of request n: the script's ID when
// it has one.
func callID(t *ToolCall, n, i int) string {
	if t.ID != "" {
		return t.ID
	}
	return fmt.Sprintf("call_fake%06d_%d", n, i)
}

// functionCall is a function_call output item.
func functionCall(t *ToolCall, n, i int, status, arguments string) map[string]any {
	item := map[string]any{"type": "function_call", "id": callItemID(n, i), "call_id": callID(t, n, i),
		"name": t.Name, "arguments": arguments, "status": status}
	if t.Namespace != "" {
		item["namespace"] = t.Namespace
	}
	return item
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}}
}

func messageItem(n, i int, status string, content []any) map[string]any {
	return map[string]any{"type": "message", "id": messageID(n, i), "status": status, "role": "assistant", "content": content}
}

// responseOutput is the finished output items of blocks, and each tool
// call's arguments as JSON.
func responseOutput(n int, blocks []Block) ([]any, []string) {
	out := make([]any, 0, len(blocks))
	args := make([]string, len(blocks))
	for i, blk := range blocks {
		if blk.Tool != nil {
			b, _ := json.Marshal(blk.Tool.Input)
			args[i] = string(b)
			out = append(out, functionCall(blk.Tool, n, i, "completed", args[i]))
			continue
		}
		out = append(out, messageItem(n, i, "completed", []any{outputText(strings.Join(blk.Chunks, ""))}))
	}
	return out, args
}

// stream writes blocks as the Responses API's stream of semantic events,
// one output item per block. It returns early when the client goes away.
func (f *Responses) stream(ctx context.Context, w http.ResponseWriter, n int, model string, blocks []Block) {
	write := startSSE(ctx, w)
	seq := 0
	send := func(event string, data map[string]any) bool {
		data["type"] = event
		data["sequence_number"] = seq
		seq++
		return write(event, data)
	}
	if !send("response.created", map[string]any{"response": responseObject(n, model, "in_progress", []any{})}) ||
		!send("response.in_progress", map[string]any{"response": responseObject(n, model, "in_progress", []any{})}) {
		return
	}
	output, args := responseOutput(n, blocks)
	for i, blk := range blocks {
		if !blk.wait(ctx) {
			return
		}
		var ok bool
		if blk.Tool != nil {
			ok = streamCall(send, n, i, blk.Tool, args[i], output[i])
		} else {
			ok = streamText(ctx, send, n, i, blk, output[i])
		}
		if !ok {
			return
		}
	}
	send("response.completed", map[string]any{"response": responseObject(n, model, "completed", output)})
}

type sendFunc func(event string, data map[string]any) bool

// streamText streams text block i as a message item with one output_text
// part, a delta per chunk.
func streamText(ctx context.Context, send sendFunc, n, i int, blk Block, done any) bool {
	id := messageID(n, i)
	at := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"], m["content_index"] = id, i, 0
		return m
	}
	if !send("response.output_item.added", map[string]any{"output_index": i, "item": messageItem(n, i, "in_progress", []any{})}) ||
		!send("response.content_part.added", at(map[string]any{"part": outputText("")})) {
		return false
	}
	for j, c := range blk.Chunks {
		if !blk.pause(ctx, j) || !send("response.output_text.delta", at(map[string]any{"delta": c, "logprobs": []any{}})) {
			return false
		}
	}
	text := strings.Join(blk.Chunks, "")
	return send("response.output_text.done", at(map[string]any{"text": text, "logprobs": []any{}})) &&
		send("response.content_part.done", at(map[string]any{"part": outputText(text)})) &&
		send("response.output_item.done", map[string]any{"output_index": i, "item": done})
}

// streamCall streams tool call i as a function_call item whose arguments
// come in two deltas, so the client has to put them together.
func streamCall(send sendFunc, n, i int, t *ToolCall, args string, done any) bool {
	id := callItemID(n, i)
	if !send("response.output_item.added", map[string]any{"output_index": i, "item": functionCall(t, n, i, "in_progress", "")}) {
		return false
	}
	half := len(args) / 2
	for _, part := range []string{args[:half], args[half:]} {
		if !send("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": part}) {
			return false
		}
	}
	return send("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "name": t.Name, "arguments": args}) &&
		send("response.output_item.done", map[string]any{"output_index": i, "item": done})
}
