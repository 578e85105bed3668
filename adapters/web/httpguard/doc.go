// Package httpguard is the middleware in front of parley's one HTTP
// listener: what keeps a browser from being turned against parley, the
// bearer token, and bounds on request bodies. It knows HTTP and nothing of
// parley's domain, so cmd can put it in front of the web adapter's page and
// API, the MCP endpoint and the metrics alike.
//
// A Guard, built from the configured token and allowed host names, offers
// one method per class of route, each the same composition for every route
// of its class:
//
//   - Browser: the Host check against DNS rebinding, and for requests that
//     change state the checks against cross-site request forgery (no
//     cross-site Sec-Fetch-Site, no foreign Origin, a POST only as JSON).
//     It wraps every route but the platforms' webhooks, which platforms
//     reach under a public name and authenticate with their own secret.
//   - Token: the bearer token, compared in constant time and never logged
//     or echoed (the metrics).
//   - API and MCP: the token, then the request body read whole within a
//     size limit and a time limit before the handler sees it, refused in
//     the endpoint's own error format (/api's {"error": …}, JSON-RPC for
//     /mcp).
//
// The page's static files and the liveness probe get only Browser: they
// hold no data a token would protect.
//
// Every refusal closes its connection once the answer is written, without
// waiting for the rest of a body the client declared (body.go): refuse,
// answer and close, so a client cannot hold a connection by trickling the
// body of a request that was refused anyway.
//
// Two bounds hold for the whole server rather than a class of route, for
// the same reason: the server cannot have a ReadTimeout or WriteTimeout,
// which would cut the long-lived streams (SSE, MCP's GET) along with slow
// clients. BodyDeadline, in front of everything, gives every request body
// BodyTimeout to arrive, and lifts the deadline once it has. BoundStream
// (stream.go), which the event streams call, fixes the kernel's send
// buffer of their connection, so that a client that reads nothing blocks
// a write, and meets the write's deadline, after StreamSendBuffer rather
// than after megabytes, and makes the close that follows a reset, which
// drops what the client did not take; it finds the connection through
// ConnContext, which the server sets. A stream that ends by design asks
// Settled whether its client acknowledged everything (Linux's SIOCOUTQ):
// then it closes in good order, and otherwise with the reset.
//
// It is a package of its own, under the web adapter that owns /api, because
// it imports only the standard library (and golang.org/x/sys on Linux)
// while the adapter imports core: cmd guards /mcp and /metrics with it
// without linking the page to them.
package httpguard
