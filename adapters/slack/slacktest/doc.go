// Package slacktest is a fake Slack for tests: the Web API methods parley
// uses, file uploads and downloads, response URLs and a Socket Mode
// websocket, on a loopback port that slack-go talks to through
// slack.OptionAPIURL(srv.URL) — its Web API client and its socketmode
// client alike. It replaces slack-go's own slacktest, which lacks
// chat.update, chat.delete and files and enforces nothing.
//
// It keeps users, channels (public ones, with or without the bot, and DMs),
// messages with their threads, blocks, reactions and files, and the
// envelopes of Socket Mode, and it answers as Slack does, with the same
// JSON shapes and error codes, because adapters match on them; every shape
// was checked against what slack-go v0.35.0 sends and parses:
//
//   - requests: POST (or GET) /api/{method}, form-encoded or JSON, the
//     token in "Authorization: Bearer" or the token argument; no token is
//     not_authed, a wrong one invalid_auth, the app token on a bot method
//     (or the reverse) not_allowed_token_type, a method the workspace does
//     not offer unknown_method. Errors are HTTP 200 with ok:false and the
//     code; missing_scope names needed and provided; invalid_blocks lists
//     Slack's messages with JSON pointers. Every answer carries
//     X-OAuth-Scopes (Options.Scopes).
//   - messages: chat.postMessage posts as the bot (user BotUserID, bot_id
//     BotID) into a channel it is in (not_in_channel otherwise,
//     is_archived, channel_not_found; a user id posts to the DM); a
//     thread_ts naming a reply goes to its thread and one naming no message
//     posts to the channel, as at Slack. Text is limited to 40,000
//     characters (msg_too_long); blocks are checked (at most 50, known
//     types, section text 3,000, header 150, markdown blocks 12,000 in
//     total, buttons' text 75, value 2,000, action_id 255, unique
//     block_ids) and stored as posted. chat.update and chat.delete work on
//     the bot's messages only (cant_update_message, cant_delete_message;
//     message_not_found for unknown or deleted ones); arguments left out
//     of chat.update keep what the message had, and an update that changes
//     nothing is accepted, as at Slack, and counted (Message.Unchanged).
//   - events: what people do (Post, PostFile, Edit, Delete, Join, Slash,
//     Click) is stored and queued as one envelope, and so is what the bot
//     does in a channel it is in: Slack sends an app the message,
//     message_changed and message_deleted events of its own messages too,
//     with bot_id set, and an adapter must ignore them. A channel without
//     the bot sends nothing.
//   - Socket Mode: apps.connections.open with the app token (and
//     connections:write) gives a single-use ws:// URL; a connection gets
//     hello, then the queued envelopes, and a ping every second. An
//     envelope not acked within Options.AckTimeout is redelivered with a
//     new envelope_id, retry_attempt one higher and retry_reason
//     "timeout", on the newest open connection or the next one opened,
//     up to three times; acks of unknown or earlier ids are ignored.
//     Disconnect sends {"type":"disconnect","reason":…} and closes the
//     connection a second later; DropConnection cuts it. Envelopes wait
//     while no connection is open.
//   - the Events API over HTTP instead (DeliverEvents, eventsapi.go):
//     after a url_verification challenge, what would be an envelope is
//     POSTed, signed with the signing secret, to the Request URL: events as
//     JSON, clicks as payload=…, slash commands as a form; an event not
//     answered with a 2xx within 3s is retried with X-Slack-Retry-Num and
//     X-Slack-Retry-Reason, up to three times. Requests lists them; Send
//     sends forged or replayed ones; LoseNextAnswer loses an answer.
//   - direct messages (dm.go): OpenDM or conversations.open; their
//     messages are events with channel_type "im".
//   - files: files.getUploadURLExternal, the upload URL (multipart or raw
//     body, answered "OK - <size>"), files.completeUploadExternal (a
//     message of the bot with the files in channel_id and thread_ts,
//     shared at once where Slack takes a moment) and files.info; a file's
//     url_private_download serves it to the bot token with files:read and
//     otherwise redirects to a sign-in page, as files.slack.com does.
//   - limits (Options.Limits), sliding windows per workspace unless said:
//     chat.postMessage 1 a second per channel and 300 a minute; tier 2
//     (20/min) files.*, chat.startStream and chat.stopStream; tier 3
//     (50/min) chat.update, chat.delete, reactions.*, conversations.* and
//     assistant.threads.setStatus; tier 4 (100/min) chat.appendStream,
//     users.info and chat.getPermalink. A call may come 100ms early, to
//     absorb scheduling jitter. Over a limit the answer is 429 with
//     Retry-After (whole seconds, rounded up) and ratelimited, which
//     slack-go turns into *slack.RateLimitedError; refused calls do not
//     count.
//   - streaming (Options.Streaming) and assistant threads
//     (Options.AssistantThreads): chat.startStream needs a thread and, in
//     channels, the recipient's team and user; chat.appendStream only
//     appends (markdown_text is required: no_text); chat.update of a
//     streaming message is streaming_state_conflict; a stream ends on its
//     own Options.StreamLifetime (5 minutes) after it started, and then
//     appends and stops answer message_not_in_streaming_state. Without
//     Options.Streaming the three methods are refused with
//     Options.StreamingRefusal (unknown_method by default), as in a
//     workspace or app Slack does not offer them to. Limits count each
//     method per workspace (methodWindow). assistant.threads.setStatus sets a thread's
//     status (ThreadStatus), cleared when the bot replies there.
//   - response URLs of commands and clicks: replace_original and
//     delete_original act on the clicked message, response_type
//     "in_channel" posts as the bot, anything else is ephemeral; five uses
//     each.
//   - faults (InjectFaults, SetOutage, FailNext): a seeded share of calls,
//     or all of them during an outage, fail as production shows it — 429,
//     500 and 502 pages, a connection reset, a request held until the
//     client gives up — without any effect; FaultLostAnswer acts and then
//     resets.
//
// Tests set the workspace up with NewChannel, NewChannelWithoutBot,
// NewUser, OpenDM and Archive, act as people with Post, PostFile, Edit,
// Delete, Join, Slash and Click, act as Slack with Disconnect and
// DropConnection, look at the result with Messages, Replies, Message,
// Envelopes, Connections, Calls, RateLimited and ThreadStatus, and wait for
// the server's state with Await rather than sleeping.
package slacktest
