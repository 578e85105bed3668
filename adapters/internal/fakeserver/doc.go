// Package fakeserver holds what the platform fakes (telegramtest,
// slacktest) share as servers, apart from the platform they model: a
// change signal tests wait on (Signal, Await), sliding windows of accepted
// calls for the limits a platform documents (Windows), the seeded choice
// of injected faults (Faults) and the two faults that are the same on
// every HTTP API: a connection reset and a request that never gets an
// answer (ResetConn, Hang).
//
// It is deliberately independent of core and its outbox: the fakes are a
// separate check on how parley paces and retries, so they count and
// refuse calls by their own arithmetic, as the platform does, and share
// nothing with the code under test. Each fake keeps its own error shapes,
// fault kinds and limits; only the mechanics live here.
package fakeserver
