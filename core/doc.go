// Package core holds parley's domain: sessions and their per-platform
// bindings, inbox messages, the platform-neutral commands adapters produce,
// the events the daemon publishes, and the interfaces every other package
// meets through (Adapter and its optional capabilities, Store, Bus, Handler).
//
// It also holds the platform-independent machinery built only on those
// interfaces: the Router that decides which adapters an event goes to, the
// Outbox that paces, coalesces and retries every platform operation, the
// output-message lifecycle (one message per session and binding, edited in
// place), the tool progress message (one per session, binding and turn,
// deleted when the turn completes; progress.go, tools.go), markdown
// splitting for length limits, and the UiState reducer.
//
// core imports only the standard library and nothing of the project.
// Platform ids stay opaque here: a Telegram topic id or a Slack thread
// timestamp is just a string the owning adapter understands.
//
// Delivery is as durable as input: what an agent sends and cannot be
// derived again is journaled by the store with its event and confirmed
// operation by operation (see Dispatcher); the Outbox retries transient
// failures for as long as an operation is wanted, gives every platform call
// a deadline, and paces every call a platform throttles by the limits the
// adapter declares per scope (see Limit and Scope).
package core
