// Package inbound holds what every chat adapter does with a person's input
// once it has turned a platform update into a core.Command: telling the
// person something (Notice), deciding from the Handler's answer whether the
// input is dealt with or must come again (Settle, Submit), running the
// commands people type (Command: help, new, status and the rest of
// chatcmd's table), and retrying the handling of one update while the
// Handler fails for a reason other than the input (Retry). What stays in
// each adapter is what only its platform knows: how an update becomes a
// command (ids, places, actors), how a session's topic, thread or room is
// made, how an update is acknowledged, and the allow-list check, which each
// adapter makes itself before anything is fetched, created or said.
//
// Durable before acknowledged: an adapter acknowledges a platform update
// (Telegram's offset, Slack's envelope, Matrix's sync position) only after
// Retry returned nil for it, and Retry returns nil only once the update was
// dealt with: its command durably stored, or refused for good (a refusal
// is told to the person and settles the input; only Handler errors without
// such a meaning are retried). When ctx ends first Retry returns its error
// and the update is not acknowledged, so the platform delivers it again
// and the command's dedup key (core.Command.PlatformID) drops what was
// stored already.
//
// Notices go through the Handler like any command, so they are stored,
// journaled, paced by the outbox and deleted by the cleanup ledger at the
// next notice; one that cannot be stored is logged, never retried: a lost
// "📎 Received" must not hold back the input it is about.
//
// A session's placeholder title ("Session Nov 23 21:04") is a value:
// adapters that must name a topic, thread or room before the session
// exists use PlaceholderTitle and say so with core.Command.Placeholder, and
// the session keeps the placeholder it was given (core.Session.Placeholder),
// so that the first person's message with text names it; nothing parses
// the title back.
//
// Decision: there is no waiting for a burst of input to settle. Each
// update is handled as it comes, in the platform's order per conversation;
// "settle" here means that the Handler's answer settles the update
// (stored, or refused and told), as chatcmd.Refusal decides.
package inbound
