package modeltest

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	req.Header.Set("content-type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestStreamIsAnthropics reads a scripted answer as an SSE client does and
// checks the events come in Anthropic's order and shapes.
func TestStreamIsAnthropics(t *testing.T) {
	api := NewMessages(t)
	api.Say(Chunks(0, "Hel", "lo"), Tool("Bash", map[string]string{"command": "ls", "description": "List"}))
	resp := post(t, api.URL+"/v1/messages?beta=true", AnthropicKey,
		`{"model":"m","stream":true,"tools":[{"name":"Bash"}],"messages":[{"role":"user","content":"hi"},`+
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":true,"content":[{"type":"text","text":"no"}]}]}]}`)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var names []string
	var text, input, stop string
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			event = name
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var d struct {
			Type  string `json:"type"`
			Delta struct {
				Type        string `json:"type"`
				Text        string `json:"text"`
				PartialJSON string `json:"partial_json"`
				StopReason  string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(data), &d); err != nil || d.Type != event {
			t.Fatalf("event %q data %s: %v", event, data, err)
		}
		names = append(names, event)
		text += d.Delta.Text
		input += d.Delta.PartialJSON
		if d.Delta.StopReason != "" {
			stop = d.Delta.StopReason
		}
	}
	want := "message_start content_block_start ping content_block_delta content_block_delta content_block_stop " +
		"content_block_start content_block_delta content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %s", strings.Join(names, " "))
	}
	if text != "Hello" || input != `{"command":"ls","description":"List"}` || stop != "tool_use" {
		t.Fatalf("text %q input %q stop %q", text, input, stop)
	}
	reqs := api.ModelRequests()
	if len(reqs) != 1 || reqs[0].Model != "m" || strings.Join(reqs[0].Texts("user"), "|") != "hi|no" ||
		len(reqs[0].ToolResults()) != 1 || !reqs[0].ToolResults()[0].IsError {
		t.Fatalf("recorded %+v", reqs)
	}
}

func TestErrorsAreAnthropics(t *testing.T) {
	api := NewMessages(t)
	check := func(resp *http.Response, status int, typ string) {
		t.Helper()
		b, _ := io.ReadAll(resp.Body)
		var e struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
			RequestID string `json:"request_id"`
		}
		if resp.StatusCode != status || json.Unmarshal(b, &e) != nil || e.Type != "error" || e.Error.Type != typ ||
			e.Error.Message == "" || e.RequestID == "" || resp.Header.Get("request-id") != e.RequestID {
			t.Fatalf("status %d body %s", resp.StatusCode, b)
		}
	}
	body := `{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"user","content":"hi"}]}`
	check(post(t, api.URL+"/v1/messages", "sk-wrong", body), 401, "authentication_error")
	api.Fail(529)
	check(post(t, api.URL+"/v1/messages", AnthropicKey, body), 529, "overloaded_error")
	api.Fail(429)
	check(post(t, api.URL+"/v1/messages", AnthropicKey, body), 429, "rate_limit_error")
	api.Fail(0)
	api.Script(Reply{Status: 500})
	check(post(t, api.URL+"/v1/messages", AnthropicKey, body), 500, "api_error")

	resp := post(t, api.URL+"/v1/messages/count_tokens", AnthropicKey, body)
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	if json.NewDecoder(resp.Body).Decode(&count); resp.StatusCode != 200 || count.InputTokens <= 0 {
		t.Fatalf("count_tokens %d %+v", resp.StatusCode, count)
	}
	if n := len(api.Requests()); n != 5 {
		t.Fatalf("%d requests recorded", n)
	}
}

// TestSideRequests: requests outside the main loop are answered without
// taking the script.
func TestSideRequests(t *testing.T) {
	api := NewMessages(t)
	api.Say(Text("scripted"))
	side := post(t, api.URL+"/v1/messages", AnthropicKey, `{"model":"small","max_tokens":50,"messages":[{"role":"user","content":"title?"}]}`)
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.NewDecoder(side.Body).Decode(&msg); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "OK" {
		t.Fatalf("side answer %+v: %v", msg, err)
	}
	streamed := post(t, api.URL+"/v1/messages", AnthropicKey, `{"model":"small","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	b, _ := io.ReadAll(streamed.Body)
	if !strings.Contains(string(b), `"text":"OK"`) {
		t.Fatalf("streamed side answer %s", b)
	}
	main := post(t, api.URL+"/v1/messages", AnthropicKey, `{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"user","content":"hi"}]}`)
	b, _ = io.ReadAll(main.Body)
	if !strings.Contains(string(b), `"text":"scripted"`) || len(api.ModelRequests()) != 1 {
		t.Fatalf("main answer %s", b)
	}
}

// TestRequestTime: each request carries when it arrived, between the
// client's sending it and its answer, in the order they came.
func TestRequestTime(t *testing.T) {
	api := NewMessages(t)
	var around [][2]time.Time
	for range 2 {
		before := time.Now()
		resp := post(t, api.URL+"/v1/messages", AnthropicKey, `{"model":"m","stream":true,"tools":[{}],"messages":[{"role":"user","content":"hi"}]}`)
		io.ReadAll(resp.Body)
		around = append(around, [2]time.Time{before, time.Now()})
	}
	reqs := api.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests recorded, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.Time.Before(around[i][0]) || r.Time.After(around[i][1]) {
			t.Errorf("request %d arrived at %v, not between its sending %v and its answer %v", i, r.Time, around[i][0], around[i][1])
		}
	}
}
