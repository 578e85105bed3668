// Package web is parley's built-in web page and its HTTP API: JSON endpoints
// under /api/ and a Server-Sent Events stream of everything that happens.
//
// # An adapter that renders from state
//
// The page is a UI adapter like Telegram or Slack: input typed on it has
// origin "web", and replies route back to it. It differs in how it shows a
// session: not from the messages the outbox sends it, but from the
// session's UiState (core's reducer over the event log). So it declares
// core.Capabilities.FollowsEvents, and the dispatcher makes no platform
// operations for it: a burst of sessions created through the API queues
// nothing in the outbox and leaves nothing in the delivery journal on the
// page's account. Its primitives still exist and succeed without doing
// anything (Send returns a fresh reference, Edit and Delete are no-ops), as
// every adapter's must, and the conformance suite checks them. It is a
// core.Binder whose Bind does no I/O (a session's place on the page is its
// id), which is what makes the Router treat every session as reachable here
// and route replies to input from the page back to it — not broadcast to
// the other platforms — although core never calls Bind: the page's
// binding is the one recorded with its input.
//
// # UiState in memory
//
// The adapter keeps one uistate.UIReducer per recently used session, at most
// Options.MaxStates, least recently used first out. A reliable bus
// subscription, taken when the adapter is attached, feeds every logged event
// to the reducer of its session, if that is in memory; the UiUpdate it
// produces is kept by seq for the SSE stream (the latest 8192, at most about
// 32 MiB of them: an update carries whole items).
//
// A reducer not in memory is built on first request from the store's event
// log: the session's events reduced from its session_created event. The log
// is bounded, so an old session's beginning may be gone; then the state is
// seeded from what the store keeps for good — the session's title and
// status and its inbox messages whose events were dropped, replayed as
// synthetic events with Seq 0 — and the logged events are applied after.
// What only events carried (old live outputs, notices, tool activity, the
// options of questions no longer open) is missing from that older part.
// Live events arriving during a build are queued and applied after it, so
// the state misses none; the reducer ignores the ones the build covered.
//
// A snapshot (GET /api/sessions/{id}/state) waits, briefly, until the bus
// feed has caught up with the store's newest event when the request
// arrived. A client that opens /api/events first and then loads a snapshot
// therefore gets every event of the session either in the snapshot or on the
// stream, and applies those with a seq above the snapshot's.
//
// # The event stream
//
// GET /api/events sends each logged event (never those with Seq 0) as
//
//	id: <seq>
//	event: <kind>
//	data: {"seq","kind","session_id","ts","event":{…},"ui":{…}}
//
// where, with ?ui=delta (parley's extension, which the page uses), ui is the
// session's uistate.UIUpdate when its reducer was in memory. Without it, the
// stream sends whole states as the UiState specification has them, in their
// own messages without an id ("event: ui_state_updated", coalesced to one
// per session every 200 ms; see uiwire.go). "event: agents" messages, also
// without an id, say which sessions have an agent listening (presence.go).
// Resuming with Last-Event-ID replays the store's log after that seq, then
// follows a lossy bus subscription opened before the replay: overlapping
// live events (seq not above the last sent) are dropped, and a jump in seq or
// a grown Subscription.Dropped sends the stream back to the store, so there
// is no gap and no duplicate, and a slow client never holds up the daemon.
// When the log no longer reaches back far enough, or the id is past the
// newest event (the data was restored from a backup), an "event: resync"
// message (its id the seq the stream continues after) tells the client to
// reload its snapshots. Idle streams get a ": ping" comment every
// Options.Heartbeat.
//
// Every stream ends by design and its client reconnects (lifetime.go):
// after Options.StreamLifetime, 25 s, or earlier when Options.MaxStreams
// (1024) are open and a new one comes, which ends the oldest, as MCP's
// max_sessions does. The stream begins with "retry: 1000" and an id (the
// seq it starts after, in a message with no data), and ends with
//
//	id: <the seq it continues after>
//	event: reconnect
//	data: {"kind":"reconnect","resume":N,"reason":"…"}
//
// and its connection ("Connection: close"), so EventSource, or any client
// that reconnects with Last-Event-ID, resumes a second later where it was,
// losing nothing; a resumed stream with nothing new sends no event and no
// state, only its "agents" message. Without ?ui=delta the states still
// due are sent before the end. The page stays "live" through such a
// reconnect and reloads nothing.
//
// A client that does not read costs little and not for long. Every write
// has Options.WriteTimeout; the stream's connection has a fixed send
// buffer (httpguard.BoundStream), so once about StreamSendBuffer waits for
// a client that reads nothing, a write blocks, the deadline cuts the
// client off and its connection is reset, which drops what the kernel held
// for it. Its live events wait in a bounded buffer (Options.SSEBuffer, 64
// events) and past it are dropped and read again from the store, so a
// stalled stream holds no more. A client that was only slow reconnects
// with Last-Event-ID and loses nothing. A client that reads nothing while
// nothing happens cannot be told apart from one that reads — TCP
// acknowledges what reaches the client's system whether or not the client
// reads it, and the pings are far too small to fill its buffers — and SSE
// has no way back from the client to say it reads: the lifetime is what
// ends such a stream, within 30 s of its start, and frees what it held,
// about 35 KiB. When a stream ends by design its connection closes in good
// order if the client acknowledged everything, and is reset if not
// (httpguard.Settled), so the kernel does not go on trying to deliver to a
// client that does not read.
//
// # Pairing
//
// GET /api/pairing lists the pairing codes waiting for the operator and
// the people admitted; POST /api/pairing/{code}/approve and …/deny decide
// one (pairing.go). PairingClient is the client `parley pairing` uses.
//
// # Backups
//
// POST /api/backup answers a copy of the database, for `parley backup` of
// a running parley (BackupClient), which cannot read the file the daemon
// holds locked. Besides the token it needs the data directory's backup key
// (a header), so it gives nobody more than reading the database file
// would, one is taken at a time, and the copy is made into a local file
// before it is sent, so a slow client never holds the database (backup.go).
//
// # Managing sessions
//
// POST /api/sessions/{id}/title renames a session (core.Rename) and POST
// /api/sessions/{id}/archive archives it (manage.go). Archived means
// closed: archiving an open session closes it with core.Close, so the agent
// reads a close as after /close on a platform, and the page lists only open
// sessions unless "Show archived" is ticked. A session closed anywhere is
// therefore archived on the page too; nothing else is stored.
//
// # The page
//
// static/ holds it: no build step, nothing loaded from elsewhere. When the
// API answers 401 it asks for the token in a box, checks it with one
// request before keeping it in localStorage, and says when it is refused.
// Below 720 px the session list is a drawer over the page. Every POST it
// makes says Content-Type: application/json, with a body or without (the
// archive), because httpguard takes changes only as JSON; it uploads no
// files.
//
// # Wiring
//
// cmd builds the adapter before the daemon (the daemon's Router takes the
// adapters), attaches it to the daemon's store and bus with Attach, gives it
// the commands service's pairings with SetPairing and, on a bbolt store,
// its backups with SetBackup, and mounts Handler at
// "/" behind httpguard's Browser (Host, Origin, JSON) and /api/ behind its
// API (the token, bounded bodies), on a server whose ConnContext is
// httpguard.ConnContext, so that the event streams can bound their
// connections. Run receives the daemon's Handler.
// Requests that arrive while the adapter has no store, bus or Handler get
// 503, and /api/pairing without pairings too.
//
// # Middleware
//
// Package httpguard, below this one, holds the checks in front of the whole
// listener — the browser guard, the bearer token, the bounds on request
// bodies — because cmd puts them in front of /mcp and /metrics as well, and
// they need nothing of core.
package web
