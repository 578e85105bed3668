// Package matrix is parley's Matrix adapter: a room per session, on the
// same core as Telegram and Slack, through mautrix's client (without its
// crypto packages: encrypted rooms are refused, see below).
//
// Design. The bot is an ordinary Matrix account. Run long-polls /sync with
// a filter that keeps only what the adapter reads, and hands each event to
// core's Handler in order; the sync position (next_batch) and the filter
// id live in parley's store and the position moves only after every
// command of a batch is durable, so a crash repeats a batch and the event
// id, the commands' dedup key, drops what was stored already. An allowed
// person's invite makes the room a session titled by the room's name;
// anyone else's is declined. "!new [title]" creates a new room with the
// person invited, and sessions started elsewhere get a room on their first
// delivery (Binder), with the allowed people invited and, if configured,
// the room added to a space. Output goes out as m.room.message events with
// a plain body and an org.matrix.custom.html formatted_body (the markdown
// package's Matrix dialect); the live output message is edited with
// m.replace. The room's name carries the session's status.
//
// Decisions:
//
//   - Idempotent sends: every message with a core.OutMessage.Key goes under
//     a transaction id derived from it, so a send retried after a timeout
//     or replayed after a crash returns the event the homeserver already
//     made. Edits need none (a repeated edit shows the same text).
//   - Echoes: the homeserver's own dedup is not enough. Dendrite (v0.13.8)
//     looks its transaction cache up when a request starts and fills it
//     when the request ends, so a retry that arrives while the first
//     request is still being processed — a killed parley's send, replayed
//     by the restarted one — makes a second event (Synapse shares the
//     first request's result); and every homeserver forgets transactions
//     after a while (Dendrite after 30 to 60 minutes) or on its restart.
//     So, as bridges do, the adapter reads its echoes: the sync marks the
//     bot's own events with unsigned.transaction_id (for the same access
//     token), and the last 4,096 transaction ids seen map to their events.
//     A keyed send whose id was seen returns that event without sending.
//     Keyed sends wait for the first sync since the start (at most 10 s,
//     and half their own deadline; that sync does not long-poll), whose
//     incremental batch from the stored position holds what the previous
//     process made. An event still in flight at the homeserver then is not
//     in it; when it comes in a later sync under a transaction id whose
//     send returned another event, that copy is redacted (the bot may
//     always redact its own), keeping the one core holds; with no send of
//     this process to say which, the first seen stays. Decided so because
//     the duplicate is otherwise permanent and visible, and the cost is
//     one redaction in a rare case. What remains: clients show the
//     redacted copy as "message deleted" (it is an event, outside the
//     outbox's pacing), a redaction that fails is logged and not retried,
//     and the check does not survive a restart by itself: an event the
//     killed process already synced past (its position stored after the
//     event) is not in the next first sync, so only the homeserver's cache
//     stands between it and a replay; nor does a send wait that comes
//     before Check (the daemon calls Check, then Run, which a send after
//     Check waits for up to a second).
//   - Limits: homeservers limit events per account (Synapse's rc_message,
//     0.2 a second with bursts of 10, by default), but each sets its own
//     (Dendrite and Conduit count no messages; Synapse admins raise a
//     bot's), and none says its limit before it refuses. Every message,
//     edit, room name and redaction counts, so they share one account-wide
//     budget. It starts at the configured one (Synapse's default, as a
//     sliding window of half its burst: 5 events per 25 s, which never
//     exceeds the token bucket) and is learned (core.Learn): while the
//     homeserver has never answered M_LIMIT_EXCEEDED, a budget the bot
//     waits for grows by 5 per 25 s every 2 s, up to 10 events a second;
//     the first M_LIMIT_EXCEEDED ends the growth for good — such a
//     homeserver is followed, not probed — pauses the whole account for
//     exactly its retry_after_ms, and drops the budget to half what the
//     homeserver had accepted in the window, no faster than one event per
//     retry_after. Against Synapse's default that costs the refusals of
//     one instant (the calls then in flight) and none after. A quarter of
//     the budget is kept for new messages — answers, notices, questions,
//     approvals — so they never wait behind the edits of streaming
//     output. The live output is edited at most once a second, and never
//     faster than the budget's steady rate (every 5 s under Synapse's
//     default): every edit is an event stored and synced by every client.
//     See BenchmarkMatrixStreaming in cmd/parley for the figures.
//   - Size: an event holds 65,536 bytes. Content is encoded without JSON's
//     HTML escapes, the declared MaxLength (body plus formatted_body) is
//     small enough that an edit, which carries the text twice, fits with
//     the worst JSON escapes, and a content that still does not fit drops
//     its formatted body before it is refused.
//   - Edits of redacted events: homeservers accept them, so Edit reads the
//     target first and reports core.ErrMessageGone for a redacted one.
//   - A room the bot was removed from: a send there is refused with
//     M_FORBIDDEN; the adapter checks its rooms and reports
//     core.ErrThreadGone, and core binds the session to a new room.
//   - Cleanup: the bot redacts its own events anywhere, people's only where
//     its power level reaches the room's redact level (rooms it created
//     give it 100). Elsewhere Delete makes no request and returns
//     core.ErrNoCall, which the outbox takes as done without an error log.
//   - Status in rooms people made: the bot joins them with the default
//     power level, below what m.room.name needs. There ShowStatus makes no
//     call and says once in the room which power level would let it; once
//     given, the next status change shows.
//   - Questions: shown as numbered options with number emoji; the event
//     carries the options' data (org.parley.buttons), so a reply (the
//     number or the option's text) or a number-emoji reaction to it is
//     answered from the event itself, after a restart too. These are
//     Matrix's deliberate choices, naming the question: approvals of tool
//     calls are answered only so. A number typed in the room, not as a
//     reply, answers a plain question (commands' rule) but never an
//     approval: it is a message to the agent.
//   - Input: m.text and m.emote, with the start of a replied-to message
//     quoted; files (m.file, m.image, m.audio, m.video) through
//     authenticated media — or, from a homeserver older than Matrix 1.11
//     that answers it 404 M_UNRECOGNIZED, through /_matrix/media/v3 —
//     names sanitised; voice messages transcribed.
//     People's edits are not sent again (as on Telegram and Slack: the
//     agent may be acting on the original); their redactions change
//     nothing that was delivered. The bot's own events, notices, and state
//     events are not input. The first sync of an account takes no old
//     messages, only invites.
//   - Encrypted rooms are not supported yet: invited to one, or when a
//     room turns encryption on, the bot says so in the clear, logs it and
//     leaves, rather than sit in a room it cannot read.
//   - Login: an access token is used as it is; a password logs in once and
//     the token and device id are kept in the store (never logged).
//   - Several instances (parley on PostgreSQL): every instance sends, only
//     one syncs. The sync is held by the lease "matrix/<user id>"
//     (core.Lead): its holder reads the position once it holds it and
//     writes the position and the filter fenced by the lease, so after a
//     takeover the new holder goes on from the last batch stored and the
//     event ids drop what comes twice. The instances share one login, as
//     a person's clients share nothing but the account: a configured
//     token is the same everywhere, and a password's login is made once,
//     under the lease "matrix-login/<user id>", and kept in the shared
//     store, so the account gets one device, not one per instance, and
//     transaction ids (scoped by the homeserver to an access token) make a
//     send replayed by another instance the same event. After the
//     homeserver forgets that token, the instance that notices first logs
//     in again and the others take the token it stored as soon as the
//     homeserver refuses theirs (their refused call is retried). A keyed send waits for the first sync
//     (see Echoes) only on the instance that syncs; elsewhere it goes at
//     once and relies on the homeserver's transaction cache alone.
//   - Known limit: creating a room is not idempotent; a crash between the
//     homeserver's answer and the stored binding leaves an empty room.
//     "!new" keeps its room under the command's event id before the session
//     is created, so a redelivered "!new" does not make a second one.
package matrix
