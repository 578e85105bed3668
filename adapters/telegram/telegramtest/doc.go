// Package telegramtest is a fake Telegram Bot API server for tests: a real
// HTTP server on a loopback port that go-telegram/bot (or any client)
// talks to through its server URL option.
//
// It keeps chats (forum supergroups, supergroups without topics, private
// chats), the bot's rights in each, forum topics, messages, files, the
// update queue and callback queries, and it answers the way Telegram does,
// with the same JSON shapes and the same error descriptions, because
// adapters match on them:
//
//   - requests: POST /bot{token}/{method}, multipart/form-data, JSON or
//     URL-encoded; method names case-insensitive; a wrong token is 401
//     "Unauthorized", an unknown method 404 "Not Found"; files download
//     from /file/bot{token}/{file_path}.
//   - text: parse_mode HTML is parsed like tdlib parses it (the supported
//     tags, attribute rules and "can't parse entities: …" errors with byte
//     offsets; "&" not starting an entity stays a literal '&'); length
//     limits count UTF-16 code units of the visible text after parsing and
//     trimming (4096 for text, 1024 for captions); empty text is "message
//     text is empty"; a too-long send is "message is too long" but a
//     too-long edit is "MESSAGE_TOO_LONG", as on Telegram. Markdown parse
//     modes are accepted but not parsed.
//   - edits: "message is not modified: …" when text, entities and inline
//     keyboard are unchanged; editing text without reply_markup drops the
//     keyboard; "message to edit not found" for missing or deleted
//     messages, deleted topics included.
//   - topics: createForumTopic needs a forum and can_manage_topics; a
//     topic's id is its creation message's id; messages in a topic reply to
//     that creation message unless they reply to something else; sends to
//     a deleted topic (or to message_thread_id 1, the General topic) fail
//     with "message thread not found", to a closed one with TOPIC_CLOSED.
//     In callback queries the chat object has no is_forum.
//   - rich messages (Options.RichMessages): sendRichMessage and
//     rich_message on editMessageText, limited to 32,768 characters of
//     roughly rendered text. Without the option sendRichMessage is 404 and
//     rich_message on edits is ignored, so they fail with "message text is
//     empty" — what older and self-hosted Bot API servers do.
//   - updates: getUpdates long-polls with offset (confirming and dropping
//     earlier updates), limit, timeout and allowed_updates; a second poller
//     ends the first with 409; setWebhook delivers to a loopback URL with
//     the X-Telegram-Bot-Api-Secret-Token header, one update at a time,
//     retrying until the webhook answers 2xx.
//   - limits (Options.Limits): 1 call a second per chat (a supergroup
//     and all its topics together; per topic only as an explicit
//     experiment, Rates.PerTopic), 20 a minute per group across its
//     topics, 30 a second per bot; sends, edits, deletes, drafts and topic
//     calls all count; over a limit the answer is 429 "Too Many Requests:
//     retry after N" with parameters.retry_after.
//   - faults (InjectFaults, SetOutage): a seeded fraction of calls, or all
//     of them during an outage, fail as production shows it — 429 with
//     retry_after, 500, 502 with a proxy's HTML page, a connection reset,
//     a request held until the client gives up — without any effect on
//     the server's state; optionally a "lost answer" that acts and then
//     resets. Long polling and the start-up calls (DefaultExempt) are
//     spared unless Faults.Exempt says otherwise. Every 429 is recorded
//     with its chat and retry_after (TooManyAnswers), and EarlyCalls finds
//     the calls a client made to a chat before its retry_after was over.
//
// Tests act as people with SendText, SendReply, EditText, SendVoice,
// SendDocument, SendFile, SendPhoto, Click, NewTopic, CloseTopic,
// DeleteTopic and DeleteMessage, and look at what a chat shows with
// Messages, Message, Topics, Documents, Drafts, Commands, CallbackAnswers,
// Calls, TooManyAnswers, EarlyCalls, Hanging and Offset. Await waits for a
// condition without sleeping.
package telegramtest
