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
// It is a package of its own, under the web adapter that owns /api, because
// it imports only the standard library while the adapter imports core: cmd
// guards /mcp and /metrics with it without linking the page to them.
package httpguard
