// Package slack is parley's Slack adapter: a Slack app whose sessions are
// threads of one channel, and of direct messages with the bot. It uses
// github.com/slack-go/slack for the Web API, Socket Mode and the Events
// API's types; every call takes the configured API URL and HTTP client, so
// a test points the whole adapter at a fake server.
//
// Sessions and places. A session lives in a thread: core.Place{Chat: the
// channel id, Thread: the thread root's ts}. A top-level message from an
// allowed person in the channel starts a session whose conversation is
// that message's thread, titled by its first line, and is its first
// message; replies in the thread go to that session. /parley new [title]
// starts one under a root message parley posts. Sessions started elsewhere
// (the web page, the API, another platform) get a root posted in the
// channel when they first have something to show (core.Binder; the
// channel's budget paces it: core.BindPlacer). Decision: direct messages
// with the bot work the same way, each top-level message starting a
// session in its thread (Place{Chat: "D…", Thread: its ts}) — as Slack's
// own AI apps do, and so that the assistant-thread status works there —
// rather than the whole DM being one session.
//
// Input. Messages in the channel and in DMs, threads included; messages of
// any other channel, bots' (parley's own included) and subtypes that are
// not a person writing (joins, topic changes, …) are ignored. Edits are
// not sent again and deletions do not take a message back (the agent may
// already act on it), as on Telegram. An unauthorized person is ignored
// silently: the allow-list (Options.Authorizer) is asked before
// anything is fetched, created or said. Slack's text markup (<url|label>,
// <@U…>, &lt;) becomes markdown. Shared files are fetched with the bot
// token (files.go). Commands: /parley at the channel's level, "!" commands
// typed in threads (commands.go); button clicks answer questions
// (actions.go). A message's dedup key is its channel and ts
// ("C123:1712345678.000100"), so a redelivered envelope — Slack's retry,
// with a new envelope_id and a higher retry_attempt — is recognised.
//
// Acknowledgement. Every envelope (Socket Mode) or request (events mode)
// is acknowledged only after the handler made its commands durable, and
// is handled in order per conversation, conversations concurrently, so
// one slow envelope delays no other's acknowledgement; appending is fast,
// and so is the acknowledgement, well within Slack's 3 seconds — except
// for a message with files, which are fetched first (see files.go for why
// and how its redelivery is handled). Socket Mode's reconnections are in
// socket.go, events mode's signed requests in events.go. In events mode
// the HTTP server is not Run's and keeps serving while Run stops and
// starts again (the daemon restarts a failed adapter): a request is
// either queued before Run waits for its lanes or answered 503, never
// handled after Run returned (receiver, in receive.go).
//
// Output. Send posts in the session's thread (chat.postMessage with
// thread_ts), Edit is chat.update, Delete chat.delete; parley's messages
// carry the agent's markdown in a Block Kit markdown block, which Slack
// renders itself (at most 12,000 characters, counted by core in bytes, so
// that the limit holds however Slack counts), a question's options as
// buttons (the value is core's ButtonData), and a plain-text fallback for
// notifications. Notices are small grey text (a context block). When Slack
// refuses the blocks or their length, a message is sent once more as
// Slack's mrkdwn text before the refusal counts; markdown longer than a
// markdown block holds (core splits what it sends, so only a caller that
// ignores MaxLength sends it) goes as mrkdwn text at once, and past
// Slack's 40,000 characters is refused for good, never cut. Slack has no silent
// messages: every new message of a thread notifies those who follow it;
// edits do not. Nor does chat.postMessage take an idempotency key
// (OutMessage.Key is unused): a send repeated after a crash between
// Slack's answer and the journal's confirmation shows twice. Slack's errors map onto core's sentinels (errors.go), and
// its rate limits are declared per scope (adapter.go) for the outbox.
// Title and status: status.go. Typing: Slack's assistant-thread status,
// where the workspace offers it (typing.go).
//
// Streaming ([slack] stream, off by default; stream.go): the live output
// carried by chat.startStream / chat.appendStream / chat.stopStream where
// the workspace offers them — growth appended, anything else (a rewrite,
// the tail past the length limit) through chat.update, a refusal
// remembered per workspace, a stream left open by a crash stopped and
// updated on Slack's streaming_state_conflict. Measured against chat.update
// with BenchmarkSlackStreaming (parley serve and slacktest with Slack's
// limits on; each thread streams 8.6k characters in 100 steps over 15 s,
// then marks it final; one run each, on a 2-core machine shared with
// other work):
//
//	go test -run XXX -bench SlackStreaming -benchtime 1x ./cmd/parley/
//
//	threads  mode    calls (method)   429s  stale p50  stale max  final visible
//	1        update   9 (update)      0     1.06 s     1.96 s     1.01 s
//	1        stream  16 (append)      0     0.51 s     0.96 s     0.01 s
//	5        update  20 (update)      0     2.51 s     5.01 s     4.02 s
//	5        stream  30 (append)      0     1.51 s     3.01 s     2.42 s
//	20       update  35 (update)      0     10.0 s     21.1 s     20.2 s
//	20       stream  45 (append)      0     6.02 s     12.0 s     11.5 s
//
// chat.update is held to the channel's one call a second (edits may post)
// and to 50 a minute, an output edited every 2 s; appends post nothing,
// have 100 a minute of their own (spread at 5 per 3 s: without that,
// twenty threads spent the minute in its first seconds and the stalest
// waited 50 s) and go every second. Streaming shows every thread nearly
// twice as fresh (staleness p50 and max) and every final text sooner (1.7
// to 100 times), at every size, for 1.3 to 1.8 times the calls, of a
// budget chat.update does not share — plus, outside the table (the output
// messages exist before measuring, and the benchmark's turns do not end),
// a chat.startStream and a chat.stopStream per turn (Tier 2, 20 a minute
// per workspace; past that a turn's output is posted and edited as without
// streaming). No 429 either way.
//
// Decision: by these figures streaming is the better way to carry the live
// output, and it is what to turn on wherever Slack offers it; it stays off
// by default because Slack offers it only to apps with the Agents & AI Apps
// feature, which the README's manifest does not ask for (elsewhere every
// daemon start would spend one refused call and log a warning), and
// because the figures come from the fake: the tiers are Slack's documented
// ones, but the five-minute life of a stream and what people other than
// the recipient see while it streams are observed by others, not
// documented.
package slack
