package claudecode

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// line is the union of the stream-json lines Claude Code prints; each kind
// uses some of the fields. Key order varies between lines and versions, so
// it is decoded by name, never by position.
type line struct {
	Type            string          `json:"type"`
	Subtype         string          `json:"subtype"`
	SessionID       string          `json:"session_id"`
	Model           string          `json:"model"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	Event           json.RawMessage `json:"event"`
	Message         json.RawMessage `json:"message"`
	ToolUseResult   json.RawMessage `json:"tool_use_result"`
	RequestID       string          `json:"request_id"`
	Request         json.RawMessage `json:"request"`
	Response        json.RawMessage `json:"response"`
	IsError         bool            `json:"is_error"`
	TerminalReason  string          `json:"terminal_reason"`
	StopReason      *string         `json:"stop_reason"`
	Result          string          `json:"result"`
	Errors          []string        `json:"errors"`
	Origin          *struct {
		Kind string `json:"kind"`
	} `json:"origin"`
	Attempt      int     `json:"attempt"`
	RetryDelayMS float64 `json:"retry_delay_ms"`
	ErrorStatus  *int    `json:"error_status"`
	// Error is a string on api_retry lines and on the synthetic assistant
	// message Claude Code prints when it cannot authenticate.
	Error json.RawMessage `json:"error"`
}

// controlRequest is a control_request Claude Code sent to parley.
type controlRequest struct {
	ID      string
	Subtype string
	Input   json.RawMessage
}

// controlResponse answers a control_request parley sent.
type controlResponse struct {
	ID    string
	Error string // empty on success
}

// parsed is what one stdout line means to the process: events for the
// consumer, and the protocol facts the process itself acts on.
type parsed struct {
	events   []Event
	request  *controlRequest
	response *controlResponse
	cancel   string // the id of a control request Claude Code withdrew
	// auth is set when Claude Code cannot authenticate: "api_key" (the API
	// refused the key) or "login" (no credentials at all).
	auth string
	// noConversation is set by the result line --resume prints for an id
	// it has no transcript of.
	noConversation bool
}

// parser turns stdout lines into events. It keeps the little state the
// lines need to be read: which text block of the turn is streaming, and
// each tool call's name (a tool_result names only the call's id).
type parser struct {
	next  int // number of the turn's next text block
	open  int // number of the text block being streamed, -1 when none
	tools map[string]string
}

func newParser() *parser { return &parser{open: -1, tools: map[string]string{}} }

func (p *parser) resetTurn() {
	p.next, p.open = 0, -1
	clear(p.tools)
}

// parse reads one line. A line that is not JSON is an error (the caller
// logs and skips it); a JSON line of a kind parley does not use gives
// nothing.
func (p *parser) parse(b []byte) (parsed, error) {
	var out parsed
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return out, nil
	}
	var l line
	if err := json.Unmarshal(b, &l); err != nil {
		return out, fmt.Errorf("claudecode: stdout line: %w", err)
	}
	switch l.Type {
	case "system":
		switch l.Subtype {
		case "init":
			p.resetTurn()
			out.events = append(out.events, Init{SessionID: l.SessionID, Model: l.Model})
		case "api_retry":
			r := APIRetry{Attempt: l.Attempt, Delay: time.Duration(l.RetryDelayMS * float64(time.Millisecond)), Error: rawString(l.Error)}
			if l.ErrorStatus != nil {
				r.Status = *l.ErrorStatus
			}
			if r.Status == 401 || r.Status == 403 || r.Error == "authentication_failed" {
				out.auth = "api_key"
			}
			out.events = append(out.events, r)
		}
	case "stream_event":
		if l.ParentToolUseID == nil {
			p.streamEvent(l.Event, &out)
		}
	case "assistant":
		if rawString(l.Error) == "authentication_failed" {
			out.auth = "login"
		}
		p.assistant(l, &out)
	case "user":
		p.user(l, &out)
	case "result":
		p.resetTurn()
		for _, e := range l.Errors {
			if strings.HasPrefix(e, "No conversation found") {
				out.noConversation = true
			}
		}
		r := Result{Subtype: l.Subtype, IsError: l.IsError, TerminalReason: l.TerminalReason,
			Text: l.Result, SessionID: l.SessionID, Errors: l.Errors}
		if l.Origin != nil {
			r.Origin = l.Origin.Kind
		}
		if l.StopReason != nil {
			r.StopReason = *l.StopReason
		}
		out.events = append(out.events, r)
	case "control_request":
		p.controlRequest(l, &out)
	case "control_cancel_request":
		if l.RequestID != "" {
			out.cancel = l.RequestID
			out.events = append(out.events, PermissionCancel{RequestID: l.RequestID})
		}
	case "control_response":
		var r struct {
			Subtype   string `json:"subtype"`
			RequestID string `json:"request_id"`
			Error     string `json:"error"`
		}
		if json.Unmarshal(l.Response, &r) == nil && r.RequestID != "" {
			out.response = &controlResponse{ID: r.RequestID, Error: r.Error}
			if r.Subtype == "error" && r.Error == "" {
				out.response.Error = "error"
			}
		}
	}
	return out, nil
}

func (p *parser) streamEvent(raw json.RawMessage, out *parsed) {
	var ev struct {
		Type         string `json:"type"`
		ContentBlock struct {
			Type string `json:"type"`
		} `json:"content_block"`
		Delta struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"delta"`
	}
	if json.Unmarshal(raw, &ev) != nil {
		return
	}
	switch ev.Type {
	case "content_block_start":
		if ev.ContentBlock.Type == "text" {
			p.open = p.next
			p.next++
		}
	case "content_block_delta":
		if ev.Delta.Type != "text_delta" || ev.Delta.Text == "" {
			return
		}
		if p.open < 0 {
			p.open = p.next
			p.next++
		}
		out.events = append(out.events, TextDelta{Block: p.open, Text: ev.Delta.Text})
	}
}

// contentBlock is a block of an assistant or user message line.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func messageContent(raw json.RawMessage) []contentBlock {
	var m struct {
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var blocks []contentBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return nil
	}
	return blocks
}

// assistant reads a finished assistant block. With partial messages the
// line for a text block comes after its last delta and before its
// content_block_stop, so it closes the block being streamed.
func (p *parser) assistant(l line, out *parsed) {
	for _, c := range messageContent(l.Message) {
		switch c.Type {
		case "text":
			if l.ParentToolUseID != nil {
				continue // a sub-agent's text is not the turn's answer
			}
			block := p.open
			if block < 0 {
				block = p.next
				p.next++
			}
			p.open = -1
			out.events = append(out.events, Text{Block: block, Text: c.Text})
		case "tool_use":
			p.tools[c.ID] = c.Name
			out.events = append(out.events, ToolUse{ID: c.ID, Name: c.Name, Input: c.Input})
		}
	}
}

// user reads the tool results Claude Code gave the model. The line's
// tool_use_result says more than the block: Bash's {stdout, stderr} on
// success, "Error: Exit code N\n…" (stdout and stderr mixed) on failure.
func (p *parser) user(l line, out *parsed) {
	for _, c := range messageContent(l.Message) {
		if c.Type != "tool_result" {
			continue
		}
		r := ToolResult{ToolUseID: c.ToolUseID, IsError: c.IsError}
		text := resultText(c.Content)
		var shell struct {
			Stdout      *string `json:"stdout"`
			Stderr      string  `json:"stderr"`
			Interrupted bool    `json:"interrupted"`
		}
		var errText string
		name := p.tools[c.ToolUseID]
		switch {
		case json.Unmarshal(l.ToolUseResult, &shell) == nil && shell.Stdout != nil:
			r.Stdout, r.Stderr = *shell.Stdout, shell.Stderr
			if !shell.Interrupted && !c.IsError {
				r.ExitCode = new(int)
			}
		case json.Unmarshal(l.ToolUseResult, &errText) == nil && (name == "Bash" || name == "") && exitCode(errText) != nil:
			r.ExitCode = exitCode(errText)
			_, r.Stderr, _ = strings.Cut(errText, "\n")
		case c.IsError:
			r.Stderr = text
		default:
			r.Stdout = text
		}
		out.events = append(out.events, r)
	}
}

// exitCode reads the N of "Error: Exit code N…", nil when s is not that.
func exitCode(s string) *int {
	rest, ok := strings.CutPrefix(s, "Error: Exit code ")
	if !ok {
		return nil
	}
	digits, _, _ := strings.Cut(rest, "\n")
	n, err := strconv.Atoi(strings.TrimSpace(digits))
	if err != nil {
		return nil
	}
	return &n
}

// resultText flattens a tool_result's content: a string or text blocks.
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []contentBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func (p *parser) controlRequest(l line, out *parsed) {
	var r struct {
		Subtype     string          `json:"subtype"`
		ToolName    string          `json:"tool_name"`
		Input       json.RawMessage `json:"input"`
		Description string          `json:"description"`
		ToolUseID   string          `json:"tool_use_id"`
	}
	if l.RequestID == "" || json.Unmarshal(l.Request, &r) != nil {
		return
	}
	out.request = &controlRequest{ID: l.RequestID, Subtype: r.Subtype, Input: r.Input}
	if r.Subtype == "can_use_tool" {
		out.events = append(out.events, PermissionRequest{RequestID: l.RequestID, ToolName: r.ToolName,
			ToolUseID: r.ToolUseID, Description: r.Description, Input: r.Input})
	}
}

func rawString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
