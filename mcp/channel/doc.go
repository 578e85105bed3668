// Package channel is `parley mcp --channel`: a Claude Code channel. Claude
// Code starts it as a stdio MCP server; it pushes the people's messages of
// one parley session into the running Claude Code session, gives Claude a
// reply tool, and relays Claude Code's permission prompts to the people as
// approvals. It is an MCP client of the running daemon (Streamable HTTP,
// like the `parley mcp` proxy, with the same URL and token), never a side
// door into its store.
//
// # The contract, and where it was checked
//
// Claude Code's channels reference (code.claude.com/docs/en/channels-reference,
// "Server options", "Notification format", "Expose a reply tool", "Relay
// permission prompts"), and the Claude Code 2.1.328 binary itself (the
// zod schemas and the gate in its bundled JavaScript, and a recorded
// handshake against it):
//
//   - The server declares capabilities.experimental["claude/channel"] = {}
//     (required) and ["claude/channel/permission"] = {} (relay, Claude Code
//     ≥ 2.1.81), tools = {} for a two-way channel, and instructions, which
//     are added to Claude's system prompt.
//   - An event is the notification notifications/claude/channel with params
//     {content: string, meta?: Record<string, string>}. Claude sees
//     <channel source="SERVER" k="v"…>content</channel>; a meta key must
//     match ^[a-zA-Z_][a-zA-Z0-9_]*$, others are dropped with a warning.
//     There is no acknowledgement.
//   - Permission relay: Claude Code sends
//     notifications/claude/channel/permission_request {request_id,
//     tool_name, description, input_preview}; request_id is five letters
//     a–z without l, input_preview the tool's input as JSON cut to 200
//     characters. The verdict is notifications/claude/channel/permission
//     {request_id, behavior: "allow" | "deny"}. The terminal dialog stays
//     open as well: the first answer wins, a late one is ignored ("no
//     pending entry"), and the channel is not told when the terminal
//     answered first. A deny is applied as a rejection that ends the
//     call; the verdict carries no message and no "abort".
//   - The reply tool is an ordinary MCP tool; the reference names it reply.
//   - Claude Code 2.1.328 first probes server/discover at protocol
//     2026-07-28. If the server offers 2026-07-28 it stays there, and then
//     it skips channel registration ("this connection's protocol version has
//     no channel delivery path"); offered only earlier versions, it falls
//     back to initialize at 2025-11-25. So this server offers only the
//     initialize-era versions, and refuses a 2026-07-28 request with them.
//     It declares client capabilities roots {listChanged} and elicitation
//     {form, url}, clientInfo claude-code.
//   - Claude Code installs its handler for channel events after the
//     connection is up and the tools are listed; an MCP client ignores a
//     notification it has no handler for. The first event therefore waits
//     for notifications/initialized and the answer to tools/list, plus
//     Options.Settle.
//   - Channels need a claude.ai login and `claude --channels` (or
//     --dangerously-load-development-channels server:NAME while the channel is
//     not on the allowlist); with an API key they are not registered. So the
//     tests play Claude Code's side with MCP clients that declare what it
//     declares (mcp-go's, and the official TypeScript SDK's), and run the real
//     CLI 2.1.328 with `parley mcp --channel` in its MCP configuration against
//     a fake model: it connects at 2025-11-25 (protocolEra "legacy" in its
//     debug log, the condition for registering channel events), puts the
//     instructions in the system prompt and calls mcp__parley__reply.
//
// # Exactly once, across restarts of either side
//
// The channel keeps its watermark (the last inbox message it has handled)
// with the session, in agent.state under key "channel", as {"watermark": id}.
// It reads the people's messages with chat_read_since(after watermark,
// author user); the inbox notifications of its subscription are only hints
// that wake it, and it reads again every Options.Resync as well, which is
// also how it notices a daemon that restarted silently. Each message is
// written to stdout as one event, and only then is the watermark saved;
// the save is retried until the daemon takes it. A restarted channel, or a
// channel whose daemon restarted, resumes after the saved watermark: nothing
// is lost, and nothing is pushed twice except in one window — a channel
// killed after writing an event and before its save pushes that event again
// when it starts (never less than once). With no state yet (the first run on
// a session), it starts after the last message the agent side wrote, so that
// an old session's history is not pushed as new, and keeps that start at
// once. One channel per session: two would share the watermark. "Written to
// stdout" is as far as the channel can know: the protocol has no
// acknowledgement, so an event Claude Code had read but not yet shown the
// model when it exited is not pushed again.
//
// What is pushed: every message people wrote, with meta session_id,
// message_id, origin (the platform), author (the person's name), ts and
// kind ("message"; "control" for /cancel and /close, whose content is the
// command; "answer" for an answer to someone else's question), attachments
// listed by their paths. Not pushed: the answers to the approvals the
// channel asked (they come back as verdicts).
//
// # Reply
//
// reply {text, files?} posts text as the assistant's message with
// chat.assistant.post (idempotency key per call, so a retry after a daemon
// restart never posts twice), then calls loop.yield_turn. Not session.output:
// Claude in a terminal replies when it has something to say, often several
// times a turn, and each reply is a message people should get whole and be
// notified of; output is the live message of a streamed turn, edited in
// place, which nothing here streams. yield_turn after the post moves the
// session back to waiting for people (otherwise every later message would be
// "queued" behind a turn that never ends), and the dispatcher counts the post
// as the turn's notification, so people get no second "done" ping.
//
// # Permission relay
//
// A permission_request becomes ui.request_approval {call_id: claude-ID-NONCE,
// tool: tool_name, cmd, reason: description, timeout_s} (the nonce of the
// run keeps request ids that Claude Code draws again apart; cmd is the
// command, path, pattern or URL when input_preview is whole JSON naming one,
// else input_preview as it is);
// the people see the usual three choices. Approve → allow; deny and continue,
// deny and abort → deny (the verdict has only these two); nobody in time
// (Options.ApprovalTimeout) → deny, never allow. A daemon restart during the
// wait asks again with the same call id, so a decision made meanwhile stands.
// Claude Code does not tell a channel when the prompt was answered in the
// terminal (an open request upstream, anthropics/claude-code#54597): the
// question then stays open for people until it times out, and the deny sent
// then is ignored by Claude Code as stale.
//
// # Protocol plumbing
//
// The stdio side is the package's own loop around mcp-go's MCPServer rather
// than mcp-go's StdioServer: the watermark is saved after the event is
// written, so the channel must know when that happened (one Write a message,
// under one lock); it must refuse the 2026-07-28 protocol; and StdioServer
// keeps its session in a package variable. The daemon side is mcp-go's
// client at 2025-11-25 with the GET stream open, bound to the session with
// the Parley-Session header (so it can neither read nor post elsewhere) and
// subscribed to ui://chat/inbox; a call that fails in the transport drops the
// connection and the next makes a new one. Without --session the channel
// creates a session (session.create on an unbound connection, titled
// --title) and logs its id; pass that id as --session to come back to it.
package channel
