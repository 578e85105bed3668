// Package postgres implements core.Store on PostgreSQL (15 or newer), for
// several parley instances sharing one database. It gives the guarantees of
// store/bolt, checked by the same suite (store/storetest): an append is
// committed before it returns, a dedup key makes it happen once, and message
// ids and event seqs increase in the order their transactions commit.
// Acknowledged means flushed: connections run with synchronous_commit on
// unless the URL sets it.
//
// # Layout
//
// One table per bbolt bucket (see schema.go), holding the same JSON values,
// so that a bbolt data directory copies over value for value. Keys are
// bytea: platform ids and dedup keys may hold any byte, and bytea sorts
// bytewise whatever the database's collation. Sessions carry their status
// and whether their output is streaming in columns of their own, for
// SessionsPage's filters. Messages are indexed by id and by (session, id);
// events and the delivery journal by seq, a journaled event's confirmed
// operations in journal_done. The schema is created and migrated by Open:
// versioned, forward-only migrations run in one transaction under a
// transaction-level advisory lock (two instances starting at once migrate
// one after the other), and a database whose schema_version is newer than
// this build's is refused untouched (core.ErrSchemaTooNew). Later features
// arrive as later migrations: leases with fencing (migration 2, lease.go),
// journal claims (migration 3: which instance delivers a journaled event,
// until when by the database clock; claim.go) and shared pacing (migration
// 4: the platforms' budgets and pauses, counted for every instance;
// pace.go).
//
// # Commit order
//
// A watermark reader asks for "everything after id X". With several writers
// the classic trap is an id assigned before commit: a transaction takes id
// 41, another takes 42 and commits first, the reader sees 42 and moves its
// watermark past 41, which commits a moment later and is never read. So
// ids are not taken from a sequence. One row, counters, holds the last
// message id (its millisecond time and entropy, as in store/bolt), the last
// event seq and the oldest seq the event log keeps; every transaction that
// appends messages or events, or writes a session, first locks it (SELECT …
// FOR UPDATE), assigns from it, writes it back and commits. The next
// transaction can lock it only after that commit is visible, so ids and
// seqs are assigned, and become visible, in commit order, across every
// instance: a reader's snapshot that holds id 42 holds every smaller id.
// The same lock makes seqs dense (EventsSince tells a trimmed log from a
// gap by its first row) and serializes dedup: a key is looked up and
// inserted under it, so a duplicate racing from another instance finds the
// first and returns it with Duplicate set; the UNIQUE key is the backstop.
// Sessions are read after the lock is taken, so an update never works on a
// stale copy.
//
// The cost is that these writes are serial across the whole database: the
// lock is held from the first statement to the commit's WAL flush. Each
// instance therefore writes through one committer goroutine that, like
// store/bolt's, gathers every write queued while the previous transaction
// committed into one transaction (group commit): one lock, two round trips
// (begin, the lock and the reads in one batch; the rows of the whole group
// as multi-row inserts and the commit in another) and one WAL flush for
// tens of appends. Throughput is then about group size / (round trips +
// flush); instances take turns at the lock, each with a group, so three
// instances each bring a third of the writers to a turn. BenchmarkAppend
// measures it: on two shared cores with fsync on, about 1,500 appends/s for
// one writer, 21,000/s for 64 writers on one instance and 9,000/s for 64
// spread over three (bbolt: 34,000/s at 64 writers). Writes that need no
// place in the order (cursors, the cleanup ledger, delivery confirmations,
// pairing, pruning) run in transactions of their own beside the committer,
// and reads never wait for it. Nothing here publishes: telling other
// instances about a commit is the caller's business, after Append returns.
//
// A group that fails is retried write by write, so that each caller gets
// its own error; a deadlock or serialization failure (two instances
// upserting the same ledger rows) retries the transaction.
package postgres
