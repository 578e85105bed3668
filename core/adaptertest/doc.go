// Package adaptertest is the conformance suite every parley adapter runs
// against its fake platform (telegramtest, slacktest, the real Dendrite
// behind matrixtest's proxy, the web page, the in-memory fake), so that
// what core relies on is checked once, in one place, for all of them. It
// knows no platform: a new one passes it by providing an Env, whatever its
// markup dialect (core.Markup is open).
//
// An adapter's test calls Run with a Harness, whose New builds a fresh
// adapter and platform for each check and returns an Env: the adapter, and
// the platform-side hooks the suite needs to cause faults (Vanish a message,
// DeleteThread, RateLimitNext, InjectPersonMessage) and to observe what
// people would see (Shown, Title, Calls). The suite finds what the adapter
// claims the way core does, by its optional interfaces (core.Editor,
// core.Deleter, core.Binder, core.StatusShower, core.TypingNotifier) and its
// Capabilities, and checks each claim against core's contract: sends return
// usable references and the platform shows the text (compared loosely, by
// the words of the markdown, since each platform renders it its own way);
// edits change it and an identical edit is success; declared buttons are
// shown, with data as long as core makes it; gone messages and gone
// threads are core.ErrMessageGone and core.ErrThreadGone, and binding again
// makes a working place; a 429 is a *core.RateLimitError with at least the
// platform's retry_after and the scope the adapter documents; deletes
// honour Capabilities.DeleteOthers; status and binding metadata survive
// the JSON the store keeps them in; typing indicators sent through a
// delivery.Outbox wait out a 429; the declared capabilities are sensible, stay
// put where the outbox caches them, and the declared MaxLength is what the
// platform accepts.
//
// A check that does not apply is skipped with its reason in the test's
// output: the adapter lacks the interface, or the platform cannot do what
// the check needs, which the Env must say in Cannot (or NoMessages). A
// missing hook without a reason fails, and so does one whose absence would
// hide something the adapter claims: an adapter that declares rate limits
// must let the suite provoke a 429, a TypingNotifier must let it see the
// calls. Checks are never weakened to fit an adapter; a failing check is a
// finding about the adapter or its fake.
//
// Time: a Harness whose platform runs in this process on the process clock
// (InMemory) has its time-driven checks run in a testing/synctest bubble,
// exact and instant. HTTP fakes get a short real wait (one second), and the
// assertion is an ordering that cannot flake: no typing call reached the
// platform before the retry_after had elapsed since the refused call, by
// the platform's own recorded times.
//
// The suite drives adapters directly and through a delivery.Outbox; end-to-end
// delivery through delivery.Dispatcher needs a store and is left to the
// daemon's tests (this package imports only core and the standard library).
package adaptertest
