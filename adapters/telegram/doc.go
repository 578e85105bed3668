// Package telegram is parley's Telegram adapter: a bot in a forum supergroup
// where every session has its own topic, plus private chats with the bot
// (one session per chat). It uses github.com/go-telegram/bot for every call
// except getUpdates.
//
// Input: updates are long-polled by the adapter itself, in order, and the
// offset is persisted only after the update's command is durable (the
// library's poller confirms a batch to Telegram before the last update is
// handled). Telegram allows one long poll per bot, so among several
// instances sharing a store only the holder of the lease
// "telegram/<bot id>" polls, and it writes the offset fenced by the lease;
// a 409 from getUpdates (another poller) gives the lease up for a while. Webhook mode answers 200 only after the same, and needs a
// secret token: a request without it (compared in constant time) is
// refused before it is read, since user ids are not secret and the allow-list
// alone would admit a forged update "from" an allowed user. Text, replies
// (quoted), slash commands (adapters/chatcmd with the prefix "/"; /new
// creates the topic and the session together; /cancel /close /title
// /status /help), voice notes (transcribed through
// [transcription], the recording attached either way), documents and photos
// (downloaded up to 20 MB under sanitised names) and button clicks (answered
// exactly once) become commands. Edited messages are not sent again: the
// agent may already be acting on the original. The General topic only
// explains /new. Unauthorized people are ignored silently: the allow-list
// (Options.Authorizer, given explicitly) is asked before anything else, so no topic
// is created, no file fetched and nothing said for them.
//
// What the adapter says to people (refusals in the handler's words, /help,
// "📎 Received …") is a notice of the session at their place, through the
// handler and the outbox like every other message, and deleted with the
// next notice. Only where no session lives (the General topic, a private
// chat before its first message) is it sent straight to the chat, since
// core's events belong to sessions.
//
// Output: rich messages (Telegram renders the markdown, about 32k
// characters) where the server supports them; otherwise HTML rendered from
// the markdown by the shared walk of package markdown (adapters/markdown),
// falling back to its plain text on "can't parse entities". Support is
// learned at start-up by a call without effect (else from the first
// answer) and remembered, so that even the first output is cut to the
// right length. RenderedLength measures a
// text as Telegram will count it once rendered.
// Telegram's errors map onto core's sentinels (errors.go), so "message is
// not modified", "message to edit not found" and "message thread not
// found" are handled by the core's output lifecycle and pacing by its
// outbox with the limits declared here.
package telegram
