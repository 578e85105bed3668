// Package core holds parley's domain: sessions and their per-platform
// bindings, inbox messages, the platform-neutral commands adapters produce,
// the events the daemon publishes, tool activity and pairing, and the
// interfaces every other package meets through (Adapter and its optional
// capabilities, Store, Bus, Handler, Authorizer, Presence). It also holds
// the declarations adapters make and the delivery engine consumes: the
// platform operations (Op, OpKind, Pacer, MethodPacer), the rate limits
// per scope, on operation kinds or platform methods (Limit, Scope, Rate,
// Learn), the ledger several instances share them through (PaceLedger),
// how a platform counts length (LengthUnit)
// and the sentinel errors both sides speak.
//
// core is what the rest agree on, not how anything is done: the engine
// that turns events into paced platform operations is core/delivery, the
// timeline a UI renders is core/uistate. core imports only the standard
// library and nothing of the project, and holds no words for people: the
// texts a person reads are chosen where they are shown (the few several
// packages share, such as the status marks in titles and the options of an
// approval question, are in core/delivery's words.go). A UserError carries
// words, but they are chosen by whoever refuses. Platform ids stay
// opaque here: a Telegram topic id or a Slack thread timestamp is just a
// string the owning adapter understands.
package core
