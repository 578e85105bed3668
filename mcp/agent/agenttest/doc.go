// Package agenttest runs real Agent Client Protocol agents in tests,
// offline: it finds each installed agent (make test installs them, pinned,
// into caches outside the repository), skips a test when one is missing
// (fails it under make test and on CI: Missing), and sets each up in the
// test's own directories to talk only to a fake model API of package
// modeltest — OpenCode to the Messages fake, Codex (through Zed's
// codex-acp adapter) to the Responses fake. Agent is the result: the ACP
// command line and a complete environment, for a test to start directly
// or to hand to parley as an agent's command.
//
// Nothing outside the test is read or written: each agent gets a private
// HOME, XDG directories and TMPDIR, and an HTTP proxy (Offline) that
// refuses everything but loopback and records what was tried.
//
// The preflight tests (TestOpenCodeOffline, TestCodexOffline) speak ACP to
// each agent with a minimal JSON-RPC client of their own and show that it
// runs offline; they also record each agent's ways, which the ACP driver
// depends on. Observed on 2026-11-28 with OpenCode 1.18.33 and codex-acp
// 0.16.0 (which embeds Codex 0.137.0), on 2 cores shared with a load
// average of 10-17, so times are upper bounds:
//
// Capabilities (initialize, protocolVersion 1, a client offering neither
// fs nor terminal). OpenCode: loadSession, mcpCapabilities {http, sse},
// promptCapabilities {embeddedContext, image}, sessionCapabilities {close,
// fork, list, resume}, one authMethod (opencode-login), agentInfo OpenCode.
// Codex: loadSession, mcpCapabilities {http; sse and acp false},
// promptCapabilities {image, embeddedContext; audio false},
// sessionCapabilities {list, resume, close} (no fork), auth {logout}, three
// authMethods (chatgpt, env_var CODEX_API_KEY, env_var OPENAI_API_KEY),
// agentInfo codex-acp. Neither needs authenticate when its configuration
// names the provider.
//
// Start-up and memory. OpenCode: initialize 10-15 s cold here (2-6 s on a
// quieter machine), 340-385 MiB RSS after it; the first session/new 4-6 s
// (to ~490 MiB); further sessions 0.2-1.1 s and about +1 MiB each; one
// process, `opencode acp`. Codex: initialize 0.4-0.8 s, 83 MiB; session/new
// 20 ms (~100 MiB); further sessions 20-200 ms and about +1 MiB each. Its
// npm command is a Node.js launcher (~41 MiB) that runs the native binary
// (~64 MiB) as a child in the same process group (the native one is also
// node_modules/.bin/codex-acp-linux-x64): kill the group.
//
// Project configuration. Over ACP, OpenCode read the opencode.json of
// session/new's cwd even when PWD named another directory (a test with the
// test binary's PWD passed). PWD is set to the work dir all the same.
//
// Sessions. session/new answers {sessionId, configOptions: [model select]}
// (OpenCode ses_…, Codex a UUID); an available_commands_update follows
// (seen before the first prompt's other updates). session/load replays the
// whole conversation as session/updates (user_message_chunk,
// agent_message_chunk, tool_call, tool_call_update) before it answers;
// Codex replays every tool call, its rejected one too, as completed. A
// session the agent never had: OpenCode answers -32603 "Internal error:
// OpenCode service failure" {service: "session"}, Codex -32002 "Resource
// not found". session/cancel (a notification) ends the prompt with
// stopReason cancelled (Codex within milliseconds, OpenCode ~0.3 s here);
// text already streamed stays sent.
//
// A turn. Each model text delta arrives as its own agent_message_chunk; a
// usage_update follows each model request; the prompt answers {stopReason:
// end_turn} (OpenCode adds usage). With a model name Codex does not know,
// it first says "Model metadata for `…` not found…" as an
// agent_message_chunk: people would read it (CodexModel avoids it).
//
// Shell calls. OpenCode (tool bash {command, description}; with
// "permission": {"bash": "ask"}) sends tool_call {status pending, title
// "bash", kind execute, rawInput {cwd} only}, then tool_call_update
// in_progress with the command as title and rawInput {command,
// description, cwd}, then session/request_permission {toolCall {toolCallId,
// title: the command, kind, rawInput {command}}, options once/allow_once,
// always/allow_always, reject/reject_once}; once allowed, updates with the
// output as content [{type: content, content: {type: text}}], and at last
// status completed with rawOutput {output, metadata {exit, truncated}}.
// Codex (tool exec_command {cmd}, approval_policy untrusted) asks first:
// request_permission {toolCall {toolCallId, kind execute, status pending,
// title: the command, content: a text of the proposal, rawInput {command:
// ["/bin/bash", "-lc", cmd], cwd, …}}, options approved/allow_once,
// approved-execpolicy-amendment/allow_always, abort/reject_once}; only once
// allowed comes tool_call {status in_progress}, then tool_call_update
// completed with no content but rawOutput {stdout, stderr,
// aggregated_output, exit_code, …}. Commands Codex deems safe (ls, cat) run
// unasked with a kind of their own (ls: search, title "List DIR").
//
// After a rejection. OpenCode marks the call failed (content and
// rawOutput.error "The user rejected permission to use this specific tool
// call.") and ends the turn with stopReason end_turn without asking the
// model again; the model gets that text as the call's is_error result
// with the next turn. Codex offers no reject that lets the turn go on: its
// reject_once is "abort", which ends the turn with stopReason cancelled
// and reports no tool_call at all; the next turn gives the model "aborted
// by user" as the call's output and a <turn_aborted> user message.
//
// MCP servers in session/new. Both take {type: "http", name, url,
// headers: [{name, value}]} and send the headers with every request
// (initialize, the GET stream, tools/list, tools/call). OpenCode (MCP
// 2025-11-25) offers the tool to the model as SERVER_TOOL, runs it
// without asking (tool_call kind other, title SERVER_TOOL, then
// tool_call_update with the result as content) and sends
// notifications/cancelled for the call after its result. Codex (MCP
// 2025-06-18) declares a namespace tool mcp__SERVER holding the server's
// tools, and asks before every call: tool_call {title "Tool: SERVER/TOOL",
// rawInput {server, tool, arguments}} first, then request_permission
// {toolCall {title "Approve MCP tool call", rawInput {server_name, …}},
// options approved/allow_once, approved-for-session/allow_always,
// approved-always/allow_always, cancel/reject_once}; the result comes as
// content and rawOutput {content}. A driver that hands parley's own server
// to Codex will see these questions for parley's tools.
//
// Network. OpenCode tries registry.npmjs.org in the background at every
// start (to install @opencode-ai/plugin into its config directory; refused
// by Offline, it logs a warning and goes on) and, without
// OPENCODE_DISABLE_MODELS_FETCH, its model catalogue. Codex tried nothing.
package agenttest
