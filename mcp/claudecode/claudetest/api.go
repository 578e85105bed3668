// Package claudetest runs the Claude Code CLI in tests: a fake Anthropic
// Messages API it can talk to offline, and helpers that find the installed
// CLI and give it an environment of its own.
//
// The fake is modeltest's Messages API, shared with the other agents that
// speak Anthropic's API (OpenCode); the names here are the ones Claude
// Code's tests were written with. It answers the requests Claude Code
// 2.1.328 makes: streaming POST /v1/messages?beta=true, token counting, and
// side requests (titles, summaries) outside the main loop.
package claudetest

import (
	"testing"
	"time"

	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// API is a fake Anthropic Messages API on 127.0.0.1; URL is the base URL
// to give the CLI as ANTHROPIC_BASE_URL.
type API = modeltest.Messages

// Reply, Block and ToolCall script the model's answers (see modeltest).
type (
	Reply    = modeltest.Reply
	Block    = modeltest.Block
	ToolCall = modeltest.ToolCall
)

// Request is one request the fake received, decoded; Message and Content
// are its conversation.
type (
	Request = modeltest.MessagesRequest
	Message = modeltest.Message
	Content = modeltest.Content
)

// NewAPI starts a fake API for the test; it is closed when the test ends.
func NewAPI(tb testing.TB) *API { return modeltest.NewMessages(tb) }

// Text is a text block streamed in one piece.
func Text(s string) Block { return modeltest.Text(s) }

// Chunks is a text block streamed in the given pieces, with pause before
// each piece but the first.
func Chunks(pause time.Duration, pieces ...string) Block {
	return modeltest.Chunks(pause, pieces...)
}

// Tool is a tool_use block calling name with input (marshalled as JSON).
func Tool(name string, input any) Block { return modeltest.Tool(name, input) }

// Bash is a tool_use block running command with Claude Code's Bash tool.
func Bash(command, description string) Block {
	return Tool("Bash", map[string]string{"command": command, "description": description})
}
