// Package matrixtest is the test harness of the Matrix adapter: a real
// homeserver to talk to, the people's side of a conversation, and a proxy
// that adds what the homeserver does not produce.
//
// # A real homeserver
//
// [Dendrite] starts a fresh Dendrite (v0.13.8 of
// github.com/matrix-org/dendrite, the last Apache-2.0 release — the AGPL
// fork's later ones must not be used — built by `make test-deps` into a
// cache outside the repository) for one test: its own throwaway
// configuration and SQLite databases in the test's temporary directory, a
// free loopback port, open registration, federation off, and Dendrite's own
// rate limiting off so that only a [Proxy] limits. It answers within a
// fraction of a second (a test that starts one, registers an account and
// stops it takes about 0.3 s here) and is stopped when the test ends; its
// log is printed when the test failed. Nothing is mocked that Dendrite can do: registration, rooms,
// invites, power levels, edits (m.replace), redactions, media and /sync are
// the real thing. Without the binaries a test is skipped with the command
// that builds them, or fails when the CI variable is set, so that CI never
// passes by skipping.
//
// # People
//
// [Homeserver.Register] creates an account through the client API and
// [Person] plays a person with a plain Matrix client (mautrix, without
// end-to-end encryption): it creates rooms, invites, writes, replies,
// reacts, edits, redacts, uploads and sets power levels, and a sync loop
// records what the account sees (timelines, invites, room names, typing,
// when each event arrived) so that a test waits for what it expects with
// [Person.WaitFor] and friends instead of sleeping.
//
// # What the homeserver does not produce
//
// Dendrite answers neither M_LIMIT_EXCEEDED (its limiter is off here, and
// it never limited per account like Synapse) nor slow responses on demand.
// [Proxy] is a reverse proxy on loopback in front of a homeserver; point
// the adapter under test at it. It enforces a Synapse-like rc_message limit
// per account ([Proxy.SetMessageLimit], whose arithmetic is [Bucket]),
// injects faults (forced M_LIMIT_EXCEEDED with a given retry_after_ms,
// late answers, requests held before the homeserver until released (a
// request still being processed when its retry arrives), M_FORBIDDEN on redaction, a room the account is no longer
// in, a homeserver without authenticated media), and counts requests by [Kind] — messages, edits, redactions, state,
// typing — for assertions and benchmarks. Its error bodies have the
// homeservers' real shapes; the harness's own tests check the injected
// M_FORBIDDEN answers against what Dendrite answers in the same situation.
package matrixtest
