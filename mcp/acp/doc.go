// Package acp runs agents that speak the Agent Client Protocol
// (https://agentclientprotocol.com: OpenCode's `opencode acp`, Gemini
// CLI's `gemini --experimental-acp`, `codex-acp`, …) for parley's
// orchestrator: a Driver is the agent.Driver of one configured ACP agent.
//
// # One process per agent, many sessions
//
// ACP is JSON-RPC 2.0 over the agent's stdin and stdout, one message a
// line; both sides send requests. A Driver starts the agent's process at
// the first Start, does initialize once, and serves every conversation of
// the agent on it as an ACP session: an agent multiplexes sessions on one
// connection. Measured with OpenCode 1.18.33 against an instant fake model
// on 2 cores shared with other work (load average 9–12; TestOpenCodeMeasure):
// 341–387 MiB RSS after initialize (4–10 s), 490 MiB after the first
// session/new (1.9–2.8 s), 525–535 MiB with 20 sessions (session/new
// 43–83 ms p50), 729–780 MiB once each of the 20 had a turn; a prompt
// 0.59–0.86 s p50; the driver's own share of streamed text (a chunk read
// off the pipe to its TextDelta) ~0.1 ms p50. One process per session
// would cost ~0.5 GiB each. A crash of the process ends every
// conversation on it (Err a *agent.Problem saying so); the next Start
// starts a process again and continues the conversation. Once no
// conversation used the process for Options.IdleTimeout (default 10
// minutes) it is stopped, and started again by the next Start.
//
// Sessions of one process share one program and one OS user: a command
// the agent runs for one session can reach what the others' run. They are
// one trust domain; agents that must be kept apart are separate Drivers
// (named agents), each with a process of its own.
//
// # Starting a conversation
//
// Start opens session/new {cwd: the workdir, mcpServers} when the request
// names no conversation; the agent names the session, which is the
// Conversation's ID. A conversation the agent gave before continues: the
// same session when this process still has it open (it was stopped without
// session/close), else session/resume where the agent offers it (no
// history is sent), else session/load, whose replay of the history as
// session/update before its answer is dropped (people saw it already).
// When the agent offers neither, or answers the resume or load with an
// error (OpenCode 1.18.33 answers an unknown session with -32603, Codex
// -32002 "Resource not found", to session/resume and session/load), Start
// fails with agent.ErrNoConversation: the orchestrator starts a new
// conversation and tells people the agent starts afresh. parley's MCP
// server (StartRequest.Tools) is given as mcpServers: Streamable HTTP with
// the credential as headers where the agent offers mcpCapabilities.http,
// else the stdio command with the credential in its environment.
//
// parley declares neither fs nor terminal in its client capabilities: the
// agent reads, writes and runs commands itself, under its own permission
// rules, and asks before what they say to ask about. Every request of the
// agent's but session/request_permission (fs/*, terminal/*, anything
// newer) is answered with JSON-RPC's method-not-found at once, so the
// agent never waits on parley for something it did not offer.
//
// # Events
//
// session/update notifications become Events in order: agent_message_chunk
// TextDelta, its block's whole Text when the block ends (at a thought, a
// tool call, another messageId, the end of the turn); agent_thought_chunk
// Thought; tool_call ToolUse (Show: rawInput's command, the file of a
// read or edit, a search's pattern, a fetch's URL, an MCP tool's
// SERVER/TOOL and arguments, else the title; Name the first title, or the
// kind where that title is the command, as Codex's is); tool_call_update
// ToolUpdate when what people read or the status changes (OpenCode
// 1.18.33 tells the command only in its first update; an update that
// ends a call and changes what people read is a ToolUpdate too, before
// the result), and ToolResult
// once completed or failed (the content's text; rawOutput's stdout,
// stderr and exit code where it has them, as Codex's shell calls have,
// with no content; OpenCode's exit code is rawOutput.metadata.exit); plan
// Plan. An agent may ask permission for a call before it reports it
// (Codex does, for its shell calls): the call is then reported from the
// request's toolCall, ToolUse before the PermissionRequest, so people read
// the command they decide on, and the tool_call that follows is the same
// call (a ToolUpdate at most). OpenCode 1.18.33 under load asks about a
// call it reported without its command before the update that tells it,
// and may end the denied call with no command: the request's command
// updates the reported call (a ToolUpdate before the PermissionRequest).
// A call that was denied, or whose request
// was withdrawn, and that the agent never reports as ended (Codex reports
// no rejected call) gets an error ToolResult saying it did not run when
// its turn ends, so no call is left shown as running. Other updates (usage, commands,
// modes) are not shown. The prompt's answer ends the turn: its stopReason
// is Result.Stop; an error answer is StopError with the agent's message.
//
// # Permissions, interrupts, stopping
//
// session/request_permission is a PermissionRequest (CanAlways when an
// allow_always option is offered), answered with Answer: Allow selects
// allow_once, Always allow_always, a denial reject_once (never
// reject_always), and a denial with Interrupt also sends session/cancel
// (the turn then ends StopDenied). ACP carries no message for the model
// and no changed input: the agent tells its model the call was rejected in
// its own words. What follows a rejection is the agent's choice, and the
// driver reports it as it is:
//
//   - OpenCode 1.18.33 offers allow_once, allow_always, reject_once. A
//     rejected call is reported failed ("The user rejected permission…")
//     and the turn ends end_turn without asking the model again; the
//     model reads the refusal with the next turn. Deny and continue:
//     the turn ends as an answer (StopEndTurn). Deny and abort: reject
//     then session/cancel, StopDenied.
//   - Codex (codex-acp 0.16.0, Codex 0.137.0) offers allow_once
//     ("approved"), allow_always (a shell call: "approved-execpolicy-
//     amendment", don't ask again for commands starting the same; an MCP
//     call: "approved-for-session", then "approved-always") and one
//     reject_once, "abort", which ends the turn with stopReason cancelled
//     and reports no tool_call; the next turn gives the model "aborted by
//     user" as the call's output. There is no reject that lets the turn go
//     on: Deny and continue selects it, and the turn ends StopDenied (the
//     agent ended it on the denial; not StopCancelled, which is a person's
//     interrupt). Deny and abort is the same, with session/cancel.
//
// A turn the agent ends cancelled after a denial ends StopDenied unless
// Interrupt cancelled it (StopCancelled). A request still open when its
// prompt ends, is interrupted, or its process ends is withdrawn
// (PermissionCancel) and answered cancelled. Interrupt is session/cancel;
// the agent then answers the prompt with stopReason cancelled. Stop
// cancels a running turn and closes the session where the agent offers
// session/close; the process serves on.
//
// parley's own tools. Codex asks before every MCP tool call, parley's own
// server's too (StartRequest.Tools, named "parley" in session/new's
// mcpServers). The driver allows those itself, allow_once, without asking
// people, and reports ToolAllowed (By "its own tools"), which the
// orchestrator records in the call's ToolGroup as an approval by parley:
// parley's server admits the agent only with its session's credential,
// binds it to that session and enforces its own rules ([mcp] send_dirs
// for files, the allowed people for questions); asking people to approve
// parley's rules again would only teach them to click Approve. The call is
// recognised by the server the agent resolved it to — Codex's structured
// rawInput.server_name in the request, and rawInput.server of its
// tool_call where reported, both equal to the name the driver gave —
// never by a title or a tool's name, which another server's tool or the
// model words as it likes. A server of the agent's own configuration with
// the same name is replaced by the one session/new names (Codex 0.137.0,
// TestCodexOwnTools), so the name is parley's server there. Any other
// server's calls are asked about as any call.
//
// # The process
//
// Every call but session/prompt has a deadline (Options.CallTimeout:
// initialize, session/new, resume, load, close); a prompt has none of its
// own (the orchestrator's deadline on the model's silence interrupts it).
// The process runs as package agentproc runs agents: its own process
// group, Pdeathsig, TMPDIR = StateDir/tmp, a marker variable
// (PARLEY_ACP_RUN), a pidfile StateDir/agent.pid, and a process a crashed
// run of parley left is stopped before the next starts. StateDir must be
// the Driver's own. Its environment is the base without CLAUDE*
// variables, then Options.ExtraEnv, then TMPDIR, the marker and PWD = the
// working directory: OpenCode 1.18.33 finds its project configuration
// (opencode.json) from $PWD, not from its working directory. A command
// that is missing, exits at once, does not answer initialize or is not
// logged in is a *agent.Problem saying what to do.
//
// Checked against OpenCode 1.18.33 (OpenCodeVersion in the tests) and
// codex-acp 0.16.0 (agenttest.CodexACPVersion), whose configuration must
// name a model Codex knows (agenttest.CodexModel, gpt-5.4-mini, which
// session/new reports as the session's model): for another, Codex says
// "Model metadata for … not found" to people at each session's start.
package acp
