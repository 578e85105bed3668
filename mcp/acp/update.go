package acp

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/parley-chat/parley/mcp/agent"
)

// sessionUpdate is a session/update's update
// (https://agentclientprotocol.com/protocol/prompt-turn#3-agent-reports-output):
// the fields parley reads of the kinds it reports.
type sessionUpdate struct {
	Kind string `json:"sessionUpdate"`
	// Content is a content block for the chunks, a list of tool call
	// contents for the tool calls.
	Content   json.RawMessage `json:"content"`
	MessageID string          `json:"messageId"`

	ToolCallID string          `json:"toolCallId"`
	Title      *string         `json:"title"`
	ToolKind   string          `json:"kind"`
	Status     string          `json:"status"`
	Locations  []location      `json:"locations"`
	RawInput   json.RawMessage `json:"rawInput"`
	RawOutput  json.RawMessage `json:"rawOutput"`

	Entries []agent.PlanEntry `json:"entries"`
}

type location struct {
	Path string `json:"path"`
}

// contentBlock is an ACP content block; parley reads text.
type contentBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// update turns one session/update into events, on the reader. While the
// session loads, updates are the history the agent replays, and dropped.
// Kinds parley does not show (user_message_chunk, usage_update,
// available_commands_update, mode and config updates) are skipped.
func (c *conversation) update(u sessionUpdate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loading || c.ended {
		return
	}
	switch u.Kind {
	case "agent_message_chunk":
		var b contentBlock
		if decode(u.Content, &b) && b.Type == "text" && b.Text != "" {
			c.textDelta(u.MessageID, b.Text)
		}
	case "agent_thought_chunk":
		var b contentBlock
		if decode(u.Content, &b) && b.Type == "text" && b.Text != "" {
			c.closeBlock()
			c.push(agent.Thought{Text: b.Text})
		}
	case "tool_call", "tool_call_update":
		c.toolCall(u)
	case "plan":
		c.push(agent.Plan{Entries: u.Entries})
	}
}

// textDelta streams answer text. A text block ends at a thought, a tool
// call, another message (ACP's messageId) and the end of the turn; then
// its whole text follows as Text.
func (c *conversation) textDelta(message, text string) {
	tb := &c.text
	if tb.open && message != "" && tb.message != "" && message != tb.message {
		c.closeBlock()
	}
	if !tb.open {
		tb.open = true
		tb.message = message
		tb.buf.Reset()
	}
	tb.buf.WriteString(text)
	c.push(agent.TextDelta{Block: tb.index, Text: text})
}

// closeBlock ends the open text block, under c.mu.
func (c *conversation) closeBlock() {
	tb := &c.text
	if !tb.open {
		return
	}
	c.push(agent.Text{Block: tb.index, Text: tb.buf.String()})
	tb.open = false
	tb.index++
	tb.buf.Reset()
}

// toolCall is what parley knows of one tool call, merged from its
// tool_call and tool_call_updates (an update carries only what changed).
type toolCall struct {
	name      string // the first title: OpenCode's is the tool's name
	title     string
	kind      string
	status    string
	locations []location
	rawInput  json.RawMessage
	show      string
	done      bool // its ToolResult was reported
	// notRun says why the call did not run, once it was denied or its
	// request withdrawn: the result it gets if the agent reports none
	// by the end of the turn (Codex reports no rejected call).
	notRun string
}

// toolCall reports a tool call: ToolUse when it is new, ToolUpdate when
// what people read of it or its status changed, ToolResult once it
// completed or failed.
func (c *conversation) toolCall(u sessionUpdate) {
	if u.ToolCallID == "" {
		return
	}
	tc := c.tools[u.ToolCallID]
	isNew := tc == nil
	if isNew {
		c.closeBlock()
		tc = &toolCall{}
		if u.Title != nil {
			tc.name = *u.Title
		}
		c.tools[u.ToolCallID] = tc
		c.toolOrder = append(c.toolOrder, u.ToolCallID)
	}
	if u.Title != nil {
		tc.title = *u.Title
	}
	if u.ToolKind != "" {
		tc.kind = u.ToolKind
	}
	if u.Locations != nil {
		tc.locations = u.Locations
	}
	if len(u.RawInput) > 0 && string(u.RawInput) != "null" {
		tc.rawInput = u.RawInput
	}
	statusChanged := u.Status != "" && u.Status != tc.status
	if u.Status != "" {
		tc.status = u.Status
	}
	show := showCall(tc.kind, tc.title, tc.rawInput, tc.locations)
	if isNew {
		tc.show = show
		if tc.name == show && tc.kind != "" && hasCommand(tc.rawInput) {
			// Codex titles a shell call with its command: the tool
			// is its kind ("execute"), not the command twice.
			tc.name = tc.kind
		}
		c.push(agent.ToolUse{ID: u.ToolCallID, Name: tc.toolName(), Kind: tc.kind, Show: show, Input: tc.rawInput})
	}
	if tc.done {
		return
	}
	ended := tc.status == "completed" || tc.status == "failed"
	if !isNew && (show != tc.show || statusChanged && !ended) {
		// A changed Show is told even by the update that ends the call:
		// the result does not carry what people read of it.
		tc.show = show
		c.push(agent.ToolUpdate{ID: u.ToolCallID, Show: show, Status: tc.status})
	}
	if ended {
		tc.done = true
		c.push(toolResult(u.ToolCallID, tc.status == "failed", u.Content, u.RawOutput))
	}
}

// notRun notes that call id did not run, for why (under c.mu).
func (c *conversation) notRun(id, why string) {
	if tc := c.tools[id]; tc != nil && !tc.done && tc.notRun == "" {
		tc.notRun = why
	}
}

// unfinished ends the calls that did not run and got no result from the
// agent, at the end of their turn (under c.mu): an error result saying
// why, so no call is left shown as running.
func (c *conversation) unfinished() {
	for _, id := range c.toolOrder {
		if tc := c.tools[id]; tc != nil && !tc.done && tc.notRun != "" {
			tc.done = true
			c.push(agent.ToolResult{ToolUseID: id, IsError: true, Stderr: tc.notRun})
		}
	}
}

// toolName names the tool: its first title, else its kind.
func (tc *toolCall) toolName() string {
	if tc.name != "" {
		return tc.name
	}
	return tc.kind
}

// toolResult is a finished call's result. The output is the text of its
// content (OpenCode 1.18.33: a shell call's stdout and stderr together),
// or rawOutput's stdout and stderr where it has them (codex-acp's shape);
// the exit code is rawOutput's exit_code, exitCode, exit or metadata.exit
// (OpenCode's), where there is one.
func toolResult(id string, failed bool, content, rawOutput json.RawMessage) agent.ToolResult {
	r := agent.ToolResult{ToolUseID: id, IsError: failed}
	var out struct {
		Stdout   *string `json:"stdout"`
		Stderr   *string `json:"stderr"`
		Output   *string `json:"output"`
		Error    *string `json:"error"`
		ExitCode *int    `json:"exit_code"`
		ExitCam  *int    `json:"exitCode"`
		Exit     *int    `json:"exit"`
		Metadata struct {
			Exit *int `json:"exit"`
		} `json:"metadata"`
	}
	decode(rawOutput, &out)
	for _, code := range []*int{out.ExitCode, out.ExitCam, out.Exit, out.Metadata.Exit} {
		if code != nil {
			r.ExitCode = code
			break
		}
	}
	if out.Stdout != nil || out.Stderr != nil {
		r.Stdout, r.Stderr = deref(out.Stdout), deref(out.Stderr)
		return r
	}
	text := contentText(content)
	if text == "" {
		switch {
		case failed && out.Error != nil:
			text = *out.Error
		case out.Output != nil:
			text = *out.Output
		}
	}
	if failed && r.ExitCode == nil {
		r.Stderr = text
	} else {
		r.Stdout = text
	}
	return r
}

// contentText joins the text of a tool call's content list
// (https://agentclientprotocol.com/protocol/tool-calls#content); diffs
// and terminals have none.
func contentText(raw json.RawMessage) string {
	var items []struct {
		Type    string       `json:"type"`
		Content contentBlock `json:"content"`
	}
	if !decode(raw, &items) {
		return ""
	}
	var parts []string
	for _, it := range items {
		if it.Type == "content" && it.Content.Type == "text" {
			parts = append(parts, it.Content.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// showMax bounds the compact JSON of an input shown for a call.
const showMax = 200

// showCall is what people should read of a call: a shell call's command,
// the file a call reads or edits, a search's pattern, a fetch's URL, else
// the call's title, else compact JSON of its input.
func showCall(kind, title string, rawInput json.RawMessage, locs []location) string {
	var in map[string]json.RawMessage
	decode(rawInput, &in)
	str := func(keys ...string) string {
		for _, k := range keys {
			var s string
			if json.Unmarshal(in[k], &s) == nil && s != "" {
				return s
			}
		}
		return ""
	}
	if cmd := command(in["command"]); cmd != "" {
		return cmd
	}
	if server, tool := str("server"), str("tool"); server != "" && tool != "" {
		// An MCP tool's call (Codex's rawInput {server, tool,
		// arguments}): the tool and its arguments.
		var b bytes.Buffer
		if json.Compact(&b, in["arguments"]) == nil && b.Len() > 0 && b.String() != "null" {
			return truncate(server+"/"+tool+" "+b.String(), showMax)
		}
		return server + "/" + tool
	}
	switch kind {
	case "read", "edit", "delete", "move":
		if s := str("filePath", "file_path", "path"); s != "" {
			return s
		}
		if len(locs) > 0 && locs[0].Path != "" {
			return locs[0].Path
		}
	case "search":
		if s := str("pattern", "query"); s != "" {
			return s
		}
	case "fetch":
		if s := str("url"); s != "" {
			return s
		}
	}
	if title != "" {
		return title
	}
	var b bytes.Buffer
	if len(rawInput) > 0 && json.Compact(&b, rawInput) == nil && b.String() != "null" {
		return truncate(b.String(), showMax)
	}
	return ""
}

// hasCommand says whether a call's rawInput has a shell command.
func hasCommand(rawInput json.RawMessage) bool {
	var in struct {
		Command json.RawMessage `json:"command"`
	}
	return decode(rawInput, &in) && command(in.Command) != ""
}

// command is a shell call's command: a string, or an argv whose script
// is the last word of sh -c / bash -lc.
func command(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var argv []string
	if json.Unmarshal(raw, &argv) != nil || len(argv) == 0 {
		return ""
	}
	if len(argv) == 3 && strings.HasPrefix(argv[1], "-") && strings.HasSuffix(argv[1], "c") {
		return argv[2]
	}
	return strings.Join(argv, " ")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// decode unmarshals raw into v, saying whether it could.
func decode(raw json.RawMessage, v any) bool {
	return len(raw) > 0 && json.Unmarshal(raw, v) == nil
}
