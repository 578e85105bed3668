// Package commands executes parley's platform-neutral commands. Service is
// the one place where input from people (adapters, the HTTP API) and output
// from agents (the MCP server) changes state.
//
// For every command it authorizes the actor against the origin's allow-list
// (unauthorized input is ignored silently, with a debug log), finds the
// session (by id, or by the binding at the platform place the input came
// from), writes the effects to the store in one transaction — inbox message,
// dedup key (origin + platform message id), session change, events and
// cleanup-ledger rows — and only then publishes the events on the bus. A
// redelivered platform update is recognised by its dedup key and neither
// appended nor published again: at-least-once delivery from platforms plus
// this dedup gives exactly-once input in the inbox. Dedup keys (and the
// session reservations of ReservationPrefix) are kept for the daemon's
// retention (30 days by default) and pruned after: a redelivery is
// recognised as long as it comes within that time, which is far longer
// than any platform redelivers (Telegram keeps updates for 24 hours).
//
// Commands of one session are executed one at a time (striped locks), so
// status transitions are decided on the state they change: a message that
// arrives while the agent is working is still appended, and an extra
// EventQueued says so. Every command that changes a session runs through
// one helper (session.go: find the session, lock and re-read it, refuse it
// closed, write the command's change with its dedup key, publish what was
// stored); each command only decides its change. The files follow what the
// Service serves: people's input (input.go), the agent's output
// (output.go), control of sessions (control.go), tool activity (tools.go),
// withdrawn questions (withdraw.go), pairing (pairing.go) and titles
// (title.go).
//
// Decisions: a message from a UI adapter at a place no session is bound to
// starts a new session there (a private chat, a new room). A reply that is
// just the number of an option of the newest open question answers it, for
// platforms without buttons — unless that question is an approval:
// approvals are answered only by a deliberate choice naming the question
// (an Answer with its QuestionID: a button, the page's choice, a Matrix
// reply or reaction to it), never by text that happens to match an
// option. While an approval is open such text ("1", "Approve") is a
// message to the agent like any other, nothing lost, and a person who
// typed it on a platform is told, by a notice only where they wrote, how
// approvals are answered. Closed sessions refuse input with ErrSessionClosed.
// A session started without a title is named after the minute it began
// until a person's first message with text names it by its first line
// (title.go); a title a person or agent gave is never replaced.
//
// Tool activity (tools.go): the session remembers its newest tool calls
// (core.ToolState), so ToolCallStart and ToolCallOutput are idempotent by
// call id (a repeat is a Duplicate result that publishes nothing) and an
// output for an unknown call is refused. Output is tail-kept
// (core.MaxToolOutput). RequestApproval is a question whose answer, in the
// same transaction, records the call's decision (EventToolApproval); only
// the three decisions answer it, and a withdrawn one leaves the call
// undecided. The question names its call and the call's digest
// (core.ToolCall.Digest: tool, command, input), and the decision is
// recorded with that digest: it belongs to the call as people saw it. The
// same call id asked about with another digest is a new question, whose
// answer then replaces the decision; asked with the same one, the request
// is refused as decided (ui.request_approval returns the decision).
//
// Every refusal the person or agent should hear about — a closed session,
// no session at the place or with the id given, content that is empty,
// too long or not UTF-8, a question no longer open — is a *core.UserError:
// its Msg is plain words without package prefixes or internal ids beyond
// those the caller gave, and it wraps the sentinel (ErrSessionClosed,
// ErrNotFound, ErrInvalid) that says what the refusal means. Adapters and
// the MCP server show delivery.UserMessage(err) and decide by the sentinel;
// errors without words (the store failing) are for logs and retries.
package commands
