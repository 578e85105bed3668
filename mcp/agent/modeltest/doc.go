// Package modeltest holds fake model APIs for tests, on loopback, so that
// real agents (Claude Code, OpenCode, Codex) run offline against them: the
// Anthropic Messages API (Messages) and the OpenAI Responses API
// (Responses). Each is modelled on its provider's documentation, not on
// what one client happens to accept, and checked against the real clients
// in the tests of mcp/claudecode and mcp/agent/agenttest.
//
// Both take the same script: a test says, request by request, what the
// model answers (text in chunks with pauses, tool calls by name, a Wait
// that holds the stream where the test needs it, an error status) and
// reads back every request, so it sees what the model was sent: earlier
// turns, tool results, the message a denial gave the model. Only requests
// of an agent's main loop (streaming, with tools) take the script; side
// requests (titles, summaries) get a short "OK".
//
// Messages: streaming POST /v1/messages (with or without ?beta=true)
// answered with the SSE events Anthropic sends (message_start,
// content_block_start/delta/stop, ping, message_delta, message_stop),
// token counting, and Anthropic's error bodies; see
// https://docs.anthropic.com/en/api/messages-streaming and
// https://docs.anthropic.com/en/api/errors.
//
// Responses: POST /v1/responses with stream true answered with the
// semantic events OpenAI documents at
// https://platform.openai.com/docs/api-reference/responses-streaming
// (response.created, response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta/done,
// response.content_part.done, response.function_call_arguments.delta/done,
// response.output_item.done, response.completed with usage), each with its
// sequence_number; function_call items as in
// https://platform.openai.com/docs/guides/function-calling (call_id,
// arguments as a JSON string, an optional namespace for tools declared in a
// namespace tool: https://platform.openai.com/docs/guides/tools-tool-search),
// and OpenAI's error bodies (https://platform.openai.com/docs/guides/error-codes).
package modeltest
