// Package orchestrator runs one agent conversation per parley session, as
// an MCP client of parley's own server: it reads people's messages and
// shows what the agent does through the chat tools only, as any agent
// would (no side door into core). It is generic around package agent: a
// session's agent is an agent.Driver (Claude Code's, package claudecode;
// the Agent Client Protocol's, package acp) given in Options.Agents, whose
// Conversations take turns and report agent.Events, the same for every
// driver. The orchestrator itself runs no process, and tests drive it with
// a fake driver.
//
// Agents. Options.Agents are the agents parley runs, by name, "" the
// default; a session runs with the one it names (core.Session.Agent,
// read with session.get when the session has no state yet, then kept in
// the state). A person's /agent NAME leaves "agent NAME" in the inbox,
// read in order with the messages: once no turn runs, the running
// conversation is stopped (kept, and resumed should the session switch
// back), and what was not handed yet goes to the new agent, which starts
// its own conversation (the Service tells people so). The switch is saved
// without moving the watermark, so a switch read again after a restart is
// one made already. A session whose agent is not configured (any more) is
// told so, once for its message, as a start failure. Every conversation
// gets parley's own MCP server, bound to its session (Options.Tools,
// StartRequest.Tools): the agent sends files, asks questions and sets the
// title with it.
//
// Connection and presence. Run keeps one unbound connection (protocol
// 2025-11-25, mcp-go's Streamable HTTP client with its GET stream)
// subscribed to ui://chat/inbox: every session counts as listened to, so
// people get no "no agent" notice. cmd gives it the MCP server's own-client
// header (Options.Header), so that its session is never the one ended to
// make room for other agents. Notifications are hints that wake the
// worker of each session they name (a bare overflow notification wakes
// every open session); chat_read_since(after, session_id) is the truth. A
// ping every 5 s finds a server that restarted; Run then reconnects, as it
// does while the server is not up yet (backoff from 100 ms to 5 s), and
// after each connection lists every session (session.list) and wakes each
// open one: catch-up is linear in the open sessions, at start-up only.
//
// Per session, one goroutine (the worker) owns everything: the state, the
// conversation, the running turn. State lives with the session, one record
// (agent.state key "claude-code", the name it got when Claude Code was the
// one agent): {"watermark": msgid, "told": msgid, and the default agent's
// "conversation": id, "started": bool, "kind": the agent's kind} (state.go).
// A session with no state starts after the last message the agent side
// wrote (author assistant or system), so an old session's history is not
// handed as a turn; that watermark is saved before anything starts. A
// driver that names conversations (agent.Namer, Claude Code) has its
// conversation named and saved before it starts; for the others the id the
// agent gave is saved once Start returned (conversation.go says what a
// crash in between costs). The watermark is saved only when a turn's
// Result arrived (the agent has the messages), before loop.yield_turn: a
// parley killed mid-turn hands the turn's messages again after the
// restart, and they are answered once — Claude Code keeps no answer of a
// killed turn. (It does keep the message, from the turn's start, so the
// model may see it twice; whether it was kept cannot be seen from outside,
// and handing it again never loses it.) A resumed conversation may first
// end a turn of the agent's own (a Result with an Origin: a background
// command the killed Claude Code left unfinished), which is not the end of
// the turn handed. ("started" says a turn of the conversation ended, so
// the next start resumes; for a Namer, when a start fails the other resume
// is tried once, which covers a crash between a Result and its save, and a
// first turn killed after it began.) A restart that finds a session
// working or waiting with nothing pending completes its turn
// (loop.yield_turn), which the crash left open.
//
// Turns. A person's messages (author user, not a control message, not an
// answer: application/vnd.parley.answer, or text/plain holding a decision
// as parley stored answers before) that
// arrive while a turn runs are queued and handed together as the next
// turn, in order, separated by a blank line; when several people wrote,
// each message starts with its author's name. Attachments are named with
// their path, so the agent can read them. One long-lived conversation takes
// every turn of its session.
//
// What people see, through the tools only. Streamed text is the turn's live
// output (session.output with the turn's whole text so far, its blocks
// separated by a blank line): the first text at once, then at most one
// call per 100 ms with the newest text, a trailing call making sure the
// last text is shown; pending text is flushed before a tool call is shown.
// Each tool use is ui.tool_call (call_id the tool call's id; cmd what the
// driver says people should read, agent.ToolUse.Show: a command, a file, a
// pattern, a URL) and its result ui.tool_output (stdout, stderr tails, the
// exit code; an error without one shows as 1); a ToolUpdate that shows the
// call otherwise (an ACP agent telling the command once it has it) is
// ui.tool_call again with the new cmd, which updates the ToolGroup. The
// agent's thoughts are never shown as the answer (they count as the model
// at work for the API deadline). A Plan is a checklist at the top of the
// turn's output — "**Plan**", one line a step, ✅ done, ▶️ under way, ⬜ to
// do — replaced whole as the agent revises it and kept in the final
// output: the output message is the one message edited in place, where a
// plan that changes every few seconds belongs; a message of its own would
// notify people at each change, or need an item kind of its own on every
// platform. At the end of a turn (its Result) the whole
// answer goes out once more as the final session.output, then
// loop.yield_turn, which only completes the turn since the output is final
// already: the answer is in the one output message, shown once, never
// also posted with chat.assistant.post; the person is notified once by the
// turn's completion. A turn with no text shows no output (or, when the
// output showed something else, "(no text answer)"). How a turn ended is
// said under its answer when the agent did not simply answer
// (Result.Stop): "⏹ Cancelled." for an interrupt, a denial that ended it,
// the model's refusal, its output limit (max_tokens), the agent's limit of
// model requests (max_turn_requests) — each said plainly as the agent's or
// the model's doing, never as parley's error — and "⚠️" with the agent's
// error text for an error.
//
// Approvals (Agent.AskPermissions). A PermissionRequest becomes
// ui.request_approval {call_id: tool_use_id, tool, cmd: its Show, input, reason:
// description, timeout_s: ApprovalTimeout}, asked in its own goroutine so
// the worker goes on. input is the call's whole input (past 1 MiB, its
// SHA-256): people read only cmd (the command, or for an edit the file),
// but their decision is bound to the exact call, so a tool_use_id that
// comes again with other input is asked about again. Where the agent
// offers to remember an approval (PermissionRequest.CanAlways, ACP's
// allow_always), the question has a fourth option, Always allow (always:
// true), which allows the call and has the agent allow calls like it from
// then on (Decision.Always); the decision, approve_always, is recorded in
// the call's ToolGroup like the others. Approve allows; deny and continue denies with a
// message the model reads (do not retry it); deny and abort denies with an
// interrupt, which ends the turn (its output ends "⏹ Stopped: a tool call
// was denied.", however the driver reports the end); a timeout — ui.request_approval has
// withdrawn the question — denies; a failure to ask denies and ends the
// turn. Only people approve. While people decide, or a tool runs, the API
// deadline does not run. Without AskPermissions a prompt that arrives
// anyway is denied — unless the agent is one whose prompts parley answers
// itself under permissions = "allow" (Agent.AllowPermissions, which serve
// sets for the ACP kinds: their own settings leave prompts to the
// client; Claude Code's decide by themselves and prompt for nothing):
// then the call is allowed once and its ToolGroup records the approval as
// parley's (ui.tool_call with approved_by, which the MCP server takes from
// parley's own client alone: actor "parley (permissions = "allow")"),
// recorded before the agent is answered. A call the driver allowed itself
// (ToolAllowed: an ACP agent's call of parley's own MCP server) is
// recorded the same way, on the driver's ground ("parley (its own
// tools)"). Such a record is no decision of people's: it binds nothing,
// and a question about the call would still be asked. A turn that ends
// StopDenied though people chose to continue (the agent ends its turn on
// any denial: Codex) ends "⏹ AGENT ended the turn when a tool call was
// denied." — the agent's doing, neither a cancel nor parley's error. So
// does a turn people let go on after a denial that ends (end_turn or
// cancelled) with no text after it (OpenCode 1.18.33 ends the turn
// without asking its model again): else the topic would end at the
// answered question. An agent whose model goes on and answers (Claude
// Code) gets no note.
//
// Cancel and close (control messages). /cancel stops the agent's work on
// everything the person sent before it: the running turn is interrupted
// (a pending approval's call is denied with an interrupt instead; parley
// withdraws its question) and the messages queued behind it are dropped:
// the person called off what they had asked, and a message after the
// /cancel starts afresh. The watermark moves past the /cancel when the
// interrupted turn ends. That turn's output keeps what was streamed and
// ends with "⏹ Cancelled.", and the turn is yielded. A turn that has not ended
// 15 s after an interrupt has its conversation stopped and is ended
// without it. /close stops the conversation and forgets the session.
//
// Failures. A conversation that cannot start, or dies (Err, typically an
// agent.Problem saying the cause and the fix), gives the person one
// notice (chat.assistant.post with an idempotency_key naming the newest
// message of the batch, so a retry posts nothing twice) and is logged once;
// the turn is yielded, the messages stay unconsumed ("told" remembers the
// batch, so a start that fails again with it says nothing more) and the next
// message tries again with all of them — as does a restart. A turn whose
// model gives no output for APIDeadline (Claude Code retries a failing API
// for minutes, reporting APIRetry) is interrupted and the person told, with
// the last API error, once; its messages count as handed (the long-lived
// conversation keeps them), so the next message is answered
// with them in view.
//
// Several instances (Options.Leases). Among instances sharing a
// PostgreSQL store, a session's agent runs on the one instance holding the
// lease "session/<id>": a worker waits for it before anything else, acts
// under it, and releases it when it retires; an instance that dies loses
// it and another that heard of the session's messages takes it over and
// goes on from the watermark (lease.go). On bbolt there are no leases.
//
// max_running. A worker holds a slot from before its conversation starts
// until the conversation stopped (its process, or its share of one an ACP
// agent's sessions share: max_running then bounds running conversations,
// not processes). A session with work and no free slot waits in a
// first-come queue; its output says once that it waits ("⏳ All N agents
// are busy…", an edit, so the turn's one notification is not spent on it)
// and, when it starts, that it runs. To make room, idle conversations are
// stopped, least recently used first — one for each waiting session,
// including one that turns idle while sessions wait; a stopped session's
// next message resumes its conversation. A conversation idle for IdleStop
// is stopped too.
package orchestrator
