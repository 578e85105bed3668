// Package e2e holds parley's end-to-end tests: the whole daemon as people
// and an agent meet it, on every platform, against the platforms' fakes
// (telegramtest, slacktest), a real Matrix homeserver (Dendrite), a real
// browser, the real Claude Code command line, real ACP agents (OpenCode
// and Codex, against fake model APIs: acp_stack_test.go runs each story
// once per agent) and a real PostgreSQL. It has
// no code of its own outside its tests; this file is its documentation.
//
// The harness (harness_test.go) is written once. A stack is `parley serve`
// run in the test's process (serve.Main, started and stopped with
// servetest) on 127.0.0.1:0 with its data in a temporary directory, and an
// MCP agent subscribed to ui://chat/inbox (testagent_test.go). Each
// platform has a small driver that embeds the stack: tgStack
// (telegram_test.go), slackStack and slStack (slack_helpers_test.go),
// mxStack (matrix_helpers_test.go). A driver sets its platform's section
// in the stack's configuration and its fake platform, and adds what only
// that platform has to look at (Telegram's forum and topics, Slack's
// channel, threads and people, Matrix's rooms and people).
//
// A new platform's end-to-end tests are one more driver: a type embedding
// *stack with its fake, a constructor that makes the fake, calls newStack
// and sets the platform's section in cfg (and one that starts it), an
// await on the fake's state, and the inspectors its tests need. With the
// conformance suite (core/adaptertest), it is what a platform must pass
// (see package adapters/platform, "Adding a platform").
//
// Where waiting is the point — pacing, retry_after, backoff, outages,
// timeouts — a stack runs inside synctest.Test on an in-memory network
// (cmd/parley/internal/memnet): its fake platform, daemon and agent serve
// and call each other with no real socket, every wait passes on the
// bubble's fake clock in no real time, exactly, and a kill -9 is crash
// (crash_test.go). Tests of real servers stay on the real clock; there,
// what must still be waiting at a given moment (answers queued at a kill,
// no send unconfirmed when the database stops) is held there by the test —
// a homeserver's held request (matrixtest.Proxy.HoldNext), Telegram's 429
// from a tap — never left to how fast the machine runs, and no assertion
// bounds a duration.
//
// Where a process must die — kill -9 in the middle of a turn, the three
// instances of the cluster test, the MCP server command Claude Code
// starts, `parley pairing` as an operator types it — the tests run the
// parley command itself, built once per run with the race detector when
// the tests have it (parleyBin).
package e2e
