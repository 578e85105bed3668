// Package mcp is parley's MCP chat server, built on mcp-go and the core
// interfaces only: agents read the people's messages from the
// ui://chat/inbox resource (and ui://chat/sessions/{session_id}/inbox), are
// notified of new human messages, and act through tools (chat_read_since,
// chat.human.post, chat.assistant.post, session.output, loop.yield_turn,
// ui.ask, ui.tool_call, ui.tool_output, ui.request_approval, session.create,
// session.list, session.get, session.rename, session.close, agent.state;
// each dotted name also
// as an underscore alias) that run as commands on the core.Handler. The
// Server's Handler serves Streamable HTTP at /mcp; Proxy is `parley mcp`,
// the same over stdio.
//
// A connection is bound to a session by ?session=ID or the Parley-Session
// header. A 2025-11-25 connection's binding is fixed when it initializes:
// every later request of its MCP session must name the same one (the same
// session, or none on a connection made unbound), or it is refused with
// HTTP 403 and a JSON-RPC error, whatever its method (a tool, a resource, a
// subscription, the GET stream, DELETE), so a client cannot reach another
// session by changing the URL of one request. A 2026-07-28 request has no
// connection to bind (the protocol is stateless): each request's URL and
// header are its binding, checked as the first request of a connection is,
// and a subscriptions/listen stream's binding is fixed when it opens (the
// sessions its URIs cover are resolved then). A binding to an unknown
// session fails the first request with a message saying so. Bound, the
// connection acts on that session only: the inbox and the tools are that
// session's, a session_id naming another session is a tool error, another
// session's inbox can be neither read nor subscribed to, session.list and
// ui://agent/status show the bound session alone (session.get reads it),
// and session.create is
// refused. An agent given one session (a bound URL, `parley mcp --session`,
// the channel) cannot read or post elsewhere. Unbound, the inbox spans all
// sessions (every message carries its session_id) and the tools that act on
// a session need a session_id.
//
// The agents parley runs (agentauth.go) reach it with a credential of
// their session (AgentToken, header Parley-Agent-Token, or
// PARLEY_SESSION_TOKEN for `parley mcp --session`): an HMAC of the
// session id under a key the Server draws at start, admitted on /mcp
// without the [http] token, bound to that session whatever the URL says,
// and opening only the tools such an agent needs (chat_read_since,
// chat.assistant.post, ui.ask, session.get, session.list, session.rename),
// each once, by its underscore name (model APIs take no dots in tool
// names, and agents that turn them into underscores would see two).
//
// Notifications. mcp-go acknowledges subscriptions but delivers nothing by
// itself, so the Server tracks them: for protocol 2025-11-25 through the
// resources/subscribe and unsubscribe hooks and the session-unregister hook,
// keyed by MCP session id and written by the session's GET stream, which
// parley serves itself (stream.go; until the stream opens, as after a
// daemon restart, the notification waits, messages intact); for 2026-07-28,
// which is stateless and has no GET stream, through the subscriptions/listen
// hook, keyed by the listen request's own session and written into that
// request's stream (which mcp-go's broadcasts skip), dropped when the
// request's context ends. Run consumes a reliable bus subscription taken in
// New; for each human event (message, answer, cancel) it encodes the
// message once and only enqueues it, without blocking, onto the bounded
// queue of every subscriber whose URI covers the session, waking the
// subscriber's connection: its GET stream, or its listen request's
// goroutine — no goroutine of its own. The connection sends
// notifications/resources/updated {uri, messages}: the first message after
// a quiet spell at once, then at most one round per Options.Coalesce, so
// bursts arrive batched. A slow subscriber's queue overflows into a bare
// {uri} notification that tells it to re-read; notifications are hints, and
// chat_read_since with the last id an agent saw is the exactly-once path,
// including after a restart. Assistant messages never notify, nor does the
// agent's own session.close.
//
// Connections (conns.go, guard.go, stream.go): the Server's HTTP handler
// wraps mcp-go's and owns each MCP session's life. A session with no
// request in flight (an open GET stream counts) for 60 s ends, as by
// DELETE, so its queue and subscriptions are freed; a client that comes
// back is answered 404 and initializes again. At most Options.MaxSessions
// sessions and listen streams are open; an initialize at the bound ends the
// session idle longest (nothing in flight) to make room, and only when none
// is idle are initialize and subscriptions/listen answered 503 with a
// JSON-RPC error naming [mcp] max_sessions. The daemon's own client — the
// orchestrator, which connects over loopback HTTP with the secret header
// OwnClientHeader gives it (random per start; a name or User-Agent could be
// claimed by anyone) — is never the session ended to make room, and is
// admitted past the bound. The GET stream is parley's, not mcp-go's: over
// HTTP/1.1 it takes the connection over, so a listening agent costs the
// daemon its socket and one goroutine; a session has one stream (a second
// ends the first). Every write has a deadline; a stream whose client
// answers none of the heartbeat pings for 20 s (pings every 10 s) is cut
// off, and a session whose stream was cut or timed out is ended. A
// 2025-11-25 subscriber counts as listening while its client has a request
// open (its GET stream included) or made one within the last 45 s: a client
// that exits without DELETE stops counting within 50 s (its closed stream
// is seen within 5 s), one that stops reading within 45 s too (cut after at
// most 25 s). Presence is about who can hear now, so the window is short; a
// reconnect within it does not flap. A notification carries at most 64 KiB
// of message content (one larger message alone), so a notification waiting
// for a slow stream is bounded.
//
// ui.ask makes the question id itself and registers a waiter before the Ask
// command runs, so the answer event cannot race past it; it also ends when the
// session is closed or the person cancels. A question that ends unanswered
// (the timeout, the call cancelled, the person's /cancel) is withdrawn with a
// Withdraw command (withdraw.go): its buttons go on every platform and a late
// answer is refused as no longer open.
//
// Presence (presence.go): the registry of subscriptions, of clients that
// can hear now, is what says which sessions have an agent listening. The Server serves it as the
// ui://agent/status resource, is the core.Presence the web page reads, and
// has the Handler send a short notice (Options.NoAgentNotice) to a person
// who writes from a chat platform to a session nobody listens to.
// chat_read_since takes an optional author filter (author.go).
//
// Files (files.go): chat.assistant.post sends only files whose real path
// (symlinks resolved) lies in Options.SendDirs ([mcp] send_dirs), and never
// anything under /proc, /sys, /dev or parley's own data directory and
// config file; the file is opened once by that real path, following no
// symlink, the opened file checked again, and copied from that descriptor
// into parley's store of files (Options.Files) before the message is
// appended: the platforms are sent the copy, never the path read again. A
// refusal is a tool error naming the setting.
//
// Tool activity (tooltools.go): the agent's runtime reports tool calls with
// ui.tool_call and ui.tool_output, which become ToolGroup items in the
// UIState and the turn's progress message on chat platforms, and asks for
// approvals with ui.request_approval — a question with three fixed options
// on ui.ask's machinery whose answer the Service also records as the call's
// decision; unanswered, it is withdrawn and the agent gets decision
// "timeout", never an approval. A decision belongs to the call as it was
// asked about (tool, cmd, input): the same call_id asked about anything
// else asks people again. Nothing an MCP client posts answers an approval:
// chat.human.post has no question id, and a "1" it posts is a message.
// ui.tool_call's approved_by records that parley approved a call without
// asking (permissions = "allow", parley's own tools): taken only from the
// daemon's own client, and a record binding no question.
//
// The proxy is a raw JSON-RPC relay rather than a second MCP server: each
// stdin message is forwarded with mcp-go's Streamable HTTP client transport,
// which keeps the 2025-11-25 GET stream open (continuous listening) and whose
// notifications and server requests (pings are answered locally) are written
// to stdout. The relay therefore serves both protocol generations and every
// present and future tool without knowing them; it reads only what a relay
// must: the protocol version in a 2026-07-28 request's _meta (to set the
// version, method and name headers), cancellations (to cancel the relayed
// request), and the initialize parameters and subscribed URIs, replayed when a
// restarted daemon answers 404 for the old session.
//
// Reading the newest messages for the resource pages through the inbox from
// the start, because core.Store reads only forward from a watermark: linear
// in the inbox's size. chat_read_since is the cheap path.
package mcp
