package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// fuzzTools are the tools FuzzToolArguments calls. ui.ask and
// ui.request_approval are left out: they wait for a person's answer.
var fuzzTools = []string{"chat_read_since", "chat.human.post", "chat.assistant.post", "session.output",
	"loop.yield_turn", "session.create", "session.list", "session.get", "session.rename", "session.close", "ui.tool_call", "ui.tool_output"}

// FuzzToolArguments calls the tools with arbitrary arguments ($S stands
// for a real session's id) through mcp-go's own message handling, as a
// client's tools/call arrives. Whatever the arguments, a tool answers
// without panicking, refuses text that is not valid Unicode, and explains
// a refusal in the agent's terms, never as an internal error.
func FuzzToolArguments(f *testing.F) {
	for _, seed := range []struct {
		tool uint8
		args string
	}{
		{1, `{"session_id":"$S","content":"hi"}`},
		{1, `{"session_id":"$S","content":"a\ud800b"}`},
		{2, `{"session_id":"$S","content":"**done**","files":["/etc/hostname"]}`},
		{3, `{"session_id":"$S","content":"x","final":true}`},
		{3, `{"session_id":"$S","content":5}`},
		{0, `{"after_id":"x","limit":-1}`},
		{0, `{"session_id":"$S","limit":1e400}`},
		{4, `{"session_id":"nope"}`},
		{5, `{"title":"t","extra":1}`},
		{6, `null`},
		{7, `{"session_id":"$S"}`},
		{1, "{\"session_id\":\"$S\",\"content\":\"\xff\"}"},
	} {
		f.Add(seed.tool, []byte(seed.args))
	}
	st := newStack(f, f.TempDir(), stackOptions{})
	id := st.createSession("fuzz")
	f.Fuzz(func(t *testing.T, tool uint8, args []byte) {
		args = bytes.ReplaceAll(args, []byte("$S"), []byte(id))
		if !json.Valid(args) {
			return // not a tools/call a client can send
		}
		name := fuzzTools[int(tool)%len(fuzzTools)]
		msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":`)
		msg = append(append(msg, args...), "}}"...)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, err := json.Marshal(st.srv.mcp.HandleMessage(ctx, msg))
		if err != nil {
			t.Fatal(err)
		}
		var resp struct {
			Result *struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("answer %s: %v", out, err)
		}
		if resp.Result == nil {
			return // a JSON-RPC error: arguments that are not an object
		}
		var text strings.Builder
		for _, c := range resp.Result.Content {
			text.WriteString(c.Text)
		}
		if resp.Result.IsError && strings.Contains(text.String(), "internal error") {
			t.Errorf("%s(%s) = %s", name, args, text.String())
		}
		if core.CheckJSONText(args) != nil && !resp.Result.IsError {
			t.Errorf("%s(%q) took text that is not valid Unicode: %s", name, args, text.String())
		}
	})
}
