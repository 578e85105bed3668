// Package matrixtest is the test harness of the Matrix adapter: a real
// homeserver to talk to, the people's side of a conversation, and a proxy
// that adds what the homeserver does not produce.
//
// # A real homeserver
//
// [Dendrite] starts a fresh Dendrite (v0.15.2, built by `make test-deps`
// into a cache outside the repository) for one test: its own throwaway
// configuration and SQLite databases in the test's temporary directory, a
// free loopback port, open registration, federation off, and Dendrite's own
// rate limiting off so that only a [Proxy] limits. It is ready in about a
// second and stopped when the test ends; its log is printed when the test
// failed. Nothing is mocked that Dendrite can do: registration, rooms,
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
// reacts, edits, redacts and uploads, and a sync loop records what it sees
// so that a test waits for an event with [Person.WaitFor] instead of
// sleeping.
//
// # What the homeserver does not produce
//
// Dendrite answers neither M_LIMIT_EXCEEDED (its limiter is off, and it
// does not limit per account like Synapse) nor slow responses on demand.
// [Proxy] is a reverse proxy on loopback in front of a homeserver that
// the adapter under test is pointed at. It enforces a Synapse-like
// rc_message limit per account ([Proxy.SetMessageLimit]), injects faults
// (forced M_LIMIT_EXCEEDED, late answers, M_FORBIDDEN on redaction, a room
// the account is no longer in), and counts requests by kind for benchmarks.
// Its error bodies are the homeservers' real shapes; the harness's own
// tests check the injected M_FORBIDDEN answers against what Dendrite
// itself answers in the same situation.
package matrixtest
