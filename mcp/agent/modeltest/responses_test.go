package modeltest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func postOpenAI(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// sseEvent is one server-sent event of the Responses stream, with the
// fields the tests look at.
type sseEvent struct {
	Name string
	Data struct {
		Type     string `json:"type"`
		Seq      int    `json:"sequence_number"`
		Delta    string `json:"delta"`
		Text     string `json:"text"`
		Args     string `json:"arguments"`
		ItemID   string `json:"item_id"`
		Index    int    `json:"output_index"`
		Item     json.RawMessage
		Response struct {
			Status string            `json:"status"`
			Output []json.RawMessage `json:"output"`
			Usage  *struct {
				Input  int `json:"input_tokens"`
				Output int `json:"output_tokens"`
				Total  int `json:"total_tokens"`
			} `json:"usage"`
		} `json:"response"`
	}
}

// readEvents reads an SSE body as a client does: event and data lines,
// events separated by a blank line.
func readEvents(t *testing.T, body io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var ev sseEvent
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Name != "" {
				out = append(out, ev)
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			ev.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			raw := strings.TrimPrefix(line, "data: ")
			var item struct {
				Item json.RawMessage `json:"item"`
			}
			if err := json.Unmarshal([]byte(raw), &ev.Data); err != nil || json.Unmarshal([]byte(raw), &item) != nil {
				t.Fatalf("data %s: %v", raw, err)
			}
			ev.Data.Item = item.Item
		}
	}
	return out
}

const codexLikeBody = `{"model":"m","stream":true,"tools":[{"type":"function","name":"exec_command"},` +
	`{"type":"namespace","name":"mcp__probe","tools":[{"type":"function","name":"note"}]},{"type":"web_search"}],` +
	`"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},` +
	`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_1"},` +
	`{"type":"function_call_output","call_id":"call_1","output":"a.txt"},` +
	`{"role":"user","content":"again"}]}`

// TestStreamIsOpenAIs reads a scripted answer as an SSE client does and
// checks the events come in the documented order and shapes: one output
// item per block, text deltas that add up, a function call whose argument
// deltas add up to its arguments, sequence numbers in order, and the
// completed response carrying the whole output and usage.
func TestStreamIsOpenAIs(t *testing.T) {
	api := NewResponses(t)
	api.Say(Chunks(0, "Hel", "lo"), Tool("exec_command", map[string]string{"cmd": "ls"}),
		Block{Tool: &ToolCall{ID: "call_mine", Name: "note", Namespace: "mcp__probe", Input: map[string]string{"text": "x"}}})
	resp := postOpenAI(t, api.URL+"/v1/responses", OpenAIKey, codexLikeBody)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := readEvents(t, resp.Body)
	var names []string
	var text, args string
	for i, ev := range events {
		if ev.Data.Type != ev.Name || ev.Data.Seq != i {
			t.Fatalf("event %d %q: type %q sequence %d", i, ev.Name, ev.Data.Type, ev.Data.Seq)
		}
		names = append(names, ev.Name)
		switch ev.Name {
		case "response.output_text.delta":
			text += ev.Data.Delta
		case "response.function_call_arguments.delta":
			if ev.Data.Index == 1 {
				args += ev.Data.Delta
			}
		}
	}
	want := "response.created response.in_progress " +
		"response.output_item.added response.content_part.added response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done " +
		"response.output_item.added response.function_call_arguments.delta response.function_call_arguments.delta " +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %s", strings.Join(names, " "))
	}
	if text != "Hello" || args != `{"cmd":"ls"}` {
		t.Fatalf("text %q arguments %q", text, args)
	}
	var call struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		Arguments string `json:"arguments"`
		Status    string `json:"status"`
	}
	done := events[len(events)-2]
	if err := json.Unmarshal(done.Data.Item, &call); err != nil {
		t.Fatal(err)
	}
	if call.Type != "function_call" || call.CallID != "call_mine" || call.Name != "note" || call.Namespace != "mcp__probe" ||
		call.Arguments != `{"text":"x"}` || call.Status != "completed" || !strings.HasPrefix(call.ID, "fc_") {
		t.Fatalf("function call item %s", done.Data.Item)
	}
	last := events[len(events)-1].Data.Response
	if last.Status != "completed" || len(last.Output) != 3 || last.Usage == nil || last.Usage.Total != last.Usage.Input+last.Usage.Output {
		t.Fatalf("completed response %+v", last)
	}

	reqs := api.ModelRequests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "m" || strings.Join(r.Tools, " ") != "exec_command mcp__probe.note web_search" ||
		strings.Join(r.Texts("user"), "|") != "hi|again" || strings.Join(r.Texts("developer"), "|") != "rules" {
		t.Fatalf("recorded %+v", r)
	}
	if outs := r.Outputs(); len(outs) != 1 || outs[0].CallID != "call_1" || outs[0].Output != "a.txt" ||
		r.Input[2].Name != "exec_command" || r.Input[2].Arguments != `{"cmd":"ls"}` {
		t.Fatalf("input %+v", r.Input)
	}
}

func TestErrorsAreOpenAIs(t *testing.T) {
	api := NewResponses(t)
	check := func(resp *http.Response, status int, typ, code string) {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Code    *string `json:"code"`
			} `json:"error"`
		}
		gotCode := ""
		if json.Unmarshal(b, &e) == nil && e.Error.Code != nil {
			gotCode = *e.Error.Code
		}
		if resp.StatusCode != status || e.Error.Type != typ || gotCode != code || e.Error.Message == "" ||
			resp.Header.Get("x-request-id") == "" {
			t.Fatalf("status %d body %s", resp.StatusCode, b)
		}
	}
	check(postOpenAI(t, api.URL+"/v1/responses", "sk-wrong", codexLikeBody), 401, "invalid_request_error", "invalid_api_key")
	api.Fail(429)
	check(postOpenAI(t, api.URL+"/v1/responses", OpenAIKey, codexLikeBody), 429, "requests", "rate_limit_exceeded")
	api.Fail(0)
	api.Script(Reply{Status: 500})
	check(postOpenAI(t, api.URL+"/v1/responses", OpenAIKey, codexLikeBody), 500, "server_error", "")
	check(postOpenAI(t, api.URL+"/v1/chat/completions", OpenAIKey, codexLikeBody), 404, "invalid_request_error", "")
	if n := len(api.Requests()); n != 4 {
		t.Fatalf("%d requests recorded", n)
	}
}

// TestResponsesSideRequests: requests outside the main loop (no tools, or
// not streamed) are answered without taking the script; one not streamed
// gets the whole response object.
func TestResponsesSideRequests(t *testing.T) {
	api := NewResponses(t)
	api.Say(Text("scripted"))
	side := postOpenAI(t, api.URL+"/v1/responses", OpenAIKey, `{"model":"small","input":"title?"}`)
	var obj struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Output []struct {
			Content []struct{ Type, Text string } `json:"content"`
		} `json:"output"`
	}
	if err := json.NewDecoder(side.Body).Decode(&obj); err != nil || obj.Object != "response" || obj.Status != "completed" ||
		len(obj.Output) != 1 || obj.Output[0].Content[0].Type != "output_text" || obj.Output[0].Content[0].Text != "OK" {
		t.Fatalf("side answer %+v: %v", obj, err)
	}
	main := postOpenAI(t, api.URL+"/v1/responses", OpenAIKey, codexLikeBody)
	b, _ := io.ReadAll(main.Body)
	if !strings.Contains(string(b), `"delta":"scripted"`) || len(api.ModelRequests()) != 1 || len(api.Requests()) != 2 {
		t.Fatalf("main answer %s", b)
	}
}

// TestWaitHoldsTheStream: a block with Wait is not sent before Wait is
// closed, and everything before it is; a client that goes away while held
// ends the stream.
func TestWaitHoldsTheStream(t *testing.T) {
	type streamCase struct {
		url, body, key string
		say            func(...Block)
		// firstDone is the event that ends the first block; end the
		// stream's last event.
		firstDone, end string
	}
	responses, messages := NewResponses(t), NewMessages(t)
	for name, c := range map[string]streamCase{
		"responses": {responses.URL + "/v1/responses", codexLikeBody, OpenAIKey, responses.Say,
			"event: response.output_item.done", "event: response.completed"},
		"messages": {messages.URL + "/v1/messages", `{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"user","content":"hi"}]}`,
			AnthropicKey, messages.Say, "event: content_block_stop", "event: message_stop"},
	} {
		t.Run(name, func(t *testing.T) {
			gate := make(chan struct{})
			c.say(Text("before"), Block{Chunks: []string{"after"}, Wait: gate})
			resp := postOpenAI(t, c.url, c.key, c.body)
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					lines <- sc.Text()
				}
			}()
			next := func() string {
				select {
				case l := <-lines:
					return l
				case <-time.After(10 * time.Second):
					t.Fatal("stream stalled")
					return ""
				}
			}
			// Up to the blank line that ends the first block's last event.
			for l := next(); l != c.firstDone; l = next() {
			}
			for l := next(); l != ""; l = next() {
			}
			// A stream that ignored the gate would go on at once.
			select {
			case l := <-lines:
				t.Fatalf("sent before its gate opened: %q", l)
			case <-time.After(100 * time.Millisecond):
			}
			close(gate)
			rest := ""
			for l := range lines {
				rest += l + "\n"
			}
			if !strings.Contains(rest, "after") || !strings.Contains(rest, c.end) {
				t.Fatalf("after the gate: %s", rest)
			}
		})
	}

	// A client gone while held: the handler returns, or the server's
	// Close at cleanup would wait for it for ever.
	held := NewResponses(t)
	held.Say(Text("x"), Block{Chunks: []string{"never"}, Wait: make(chan struct{})})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, held.URL+"/v1/responses", strings.NewReader(codexLikeBody))
	req.Header.Set("Authorization", "Bearer "+OpenAIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
}
