// Package delivery is parley's delivery engine: it turns the events of
// core's Bus into platform operations and runs them. The Router decides
// which adapters an event goes to; the Dispatcher decides what each of
// them must do (a message, an edit of the session's output message, a
// tool progress message, a question with buttons, a typing indicator)
// and enqueues it on the Outbox; the Outbox paces, coalesces and retries
// every operation of every adapter by the limits the adapter declares
// (core.Limit per core.Scope, learned where core.Learn says so), and the
// platform calls an adapter chooses itself by the limits it declares on
// methods (core.MethodPacer, methods.go); where several instances share a
// store, those budgets and the platforms' pauses are counted together in
// the store's core.PaceLedger (ledger.go). Long text is cut to a platform's length with Split and Tail, measured as the
// platform counts (Measure). The English a person reads in chat ("✅ Done",
// progress lines, a closed question) lives here, next to the operations
// that show it, so the domain in core stays free of it.
//
// Delivery is as durable as input: what an agent sends and cannot be
// derived again is journaled by the store with its event and confirmed
// operation by operation (see Dispatcher), and delivered by one instance
// where several share a store (claims.go); the Outbox retries transient
// failures for as long as an operation is wanted, gives every platform call
// a deadline, and paces every call a platform throttles, so one outbox
// paces everything a platform is sent. A document is read from parley's
// own copy of the file (DispatcherOptions.Files, core.FileStore), opened
// afresh for each attempt and checked against its digest, never from a
// path an agent gave; a final output sent as a document is made from its
// journaled text. The output-message lifecycle (one
// message per session and binding, edited in place; output.go) and the
// tool progress message (one per session, binding and turn, deleted when
// the turn completes; progress.go) live here too. delivery imports core
// and nothing else of the project; adapters may import it for Split,
// Measure and ButtonData.
package delivery
