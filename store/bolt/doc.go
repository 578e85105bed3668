// Package bolt implements core.Store on a single bbolt file. Everything
// parley must remember across a restart lives here: sessions and their
// bindings, the inbox, the dedup keys that make at-least-once platform
// delivery exactly-once, the bounded event log SSE clients resume from, the
// cleanup ledger and the adapters' cursors.
//
// # Layout
//
// The file holds one top-level bucket per kind of record:
//
//	meta              "schema" → decimal version; "last_id" → the last message
//	                  id's 6-byte millisecond time and 10 bytes of entropy;
//	                  "placeholders" → "1" once the sessions stored before
//	                  Session.Placeholder were given theirs (placeholder.go)
//	sessions          session id → Session JSON
//	places            lp(adapter) lp(chat) lp(thread) → session id
//	inbox             message id → Message JSON (its "id" is left empty: the
//	                  key is the id)
//	inbox_recent      message id → session id, for the newest messages
//	inbox_by_session  lp(session id) message id → empty, for all older ones
//	dedup             Append.DedupKey → message id
//	events            8-byte big-endian seq → flag, [message id], Event JSON
//	ledger            lp(adapter) lp(chat) lp(thread) lp(message id) → CleanupEntry JSON
//	ledger_by_session lp(session id) ledger key → empty, so that a session's
//	                  rows are found without reading every row
//	cursors           name → value
//	journal           8-byte seq → the event log's value, for events still to
//	                  be delivered (core.Event.Journaled)
//	journal_done      8-byte seq, operation key → empty: operations of a
//	                  journaled event already confirmed
//
// lp(x) is x prefixed with its length as a uvarint, so composite keys cannot
// be read two ways whatever bytes the platform ids contain, and a prefix of
// whole parts is a seekable range. The inbox is global and keyed by id so a
// single watermark ("everything after id X") works for all sessions (a seek
// in inbox) and for one: a seek in inbox_by_session, then a scan of
// inbox_recent, whose ids are all newer. Appends go to inbox_recent, which
// only grows at its end; every 1024 appends its entries are folded, sorted,
// into inbox_by_session. Writing each session's index range on every append
// dirtied one page per active session per transaction and doubled the cost
// of an append. Messages are never deleted.
//
// Message ids have the ULID layout (core.EncodeID). They are assigned inside
// the write transaction from the previous id kept in meta: the same
// millisecond, or an earlier one after the clock went backwards, increments
// the previous entropy; a later millisecond starts from fresh random entropy.
// Ids therefore increase strictly in commit order, across restarts and clock
// steps, which is what makes the watermark safe.
//
// An event that carries the message of its Append stores a reference to it
// rather than a second copy, so the inbox stays the one source of truth. The
// event log keeps at least Options.MaxEvents events; the oldest are trimmed
// in the transaction that lets the log grow past the bound by an eighth, so
// trimming costs one bulk delete per many appends. EventsSince reports
// core.ErrEventsTruncated when the caller's position fell off the front.
//
// # Growth
//
// Messages and sessions are kept for good; everything else is bounded. The
// event log keeps Options.MaxEvents events. Dedup keys, the reservation
// cursors of session creation and cleanup-ledger rows are removed by Prune
// once older than the retention the daemon passes (30 days by default):
// long past any platform's redelivery, and past the age at which platforms
// let bots delete messages. Prune scans in short read transactions and
// deletes in small batches through the committer, so it never holds up
// appends. The delivery journal is never pruned by age: it empties as
// platforms confirm. Sessions are listed a page at a time (SessionsPage)
// by walking their time-ordered keys backwards from a cursor.
//
// # Writes
//
// Every write goes through one committer goroutine that runs all writes
// queued while the previous transaction was committing as one bbolt
// transaction (group commit) and answers each caller only after that
// transaction was fsynced. With one writer this is a plain transaction per
// write; with hundreds it shares one fsync among a hundred appends. It is
// bbolt's DB.Batch without the fixed delay: Batch starts a batch
// MaxBatchDelay after its first call, which caps a lone writer at one
// commit per delay (at 1 ms, about a tenth of what one writer reaches here)
// and, even tuned for 256 writers (1 ms, 256 calls), reached about two
// thirds of this committer's throughput in BenchmarkAppend. A write
// function runs again when another function of its group fails, so every
// one starts by resetting what it captured, and "not found" or "already
// exists" are results it records, not errors it returns, so that they do
// not roll back the group.
//
// The committer is the one serial resource, so work that does not need the
// transaction happens in the caller's goroutine: JSON encoding before, and
// decoding the returned session after. Sessions are decoded through a small
// cache of (stored bytes, decoded value) pairs, checked byte for byte
// against the stored JSON, so it cannot serve a stale session; it holds the
// 4,096 sessions used last, not every session the file holds.
//
// # Damage
//
// A damaged file must be an error that names it and the fix, never a
// crash. bbolt trusts the file: it maps it and follows page ids, panics on
// a page that is not what it expects ("invalid freelist page"), allocates
// what a count says, and faults (SIGBUS) on a page past the end of a file
// cut short. So Open first reads the header pages itself (checkFile): a
// valid meta page, a file long enough for every page it counts, a root and
// a freelist page that are what they claim, a freelist count that fits.
// That costs three page reads whatever the size; reading every page
// (Store.Check, bbolt's Tx.Check) is left to parley doctor. Every bbolt
// transaction then runs under guard, which turns faults into panics
// (debug.SetPanicOnFault) and bbolt's panics into a *DamagedError
// (core.ErrDamaged) for that call only; panics raised by parley's own code
// are bugs and are raised again. Damage met while writing stops all later
// writes: bbolt, panicking halfway through a commit, may keep its write lock
// and a free page list that no longer matches the file.
//
// # Backups
//
// A running Store holds bbolt's exclusive lock on its file, so no other
// process can read it consistently (bbolt's read-only open waits for a
// shared lock). Store.Backup copies it from inside: one read transaction
// writes the file as it sees it (bbolt's Tx.WriteTo), a consistent
// database, while writers go on, since bbolt never reuses a page a reader
// may still see. A commit that must grow the memory map waits for the copy
// (bbolt remaps under a lock every read transaction holds), so the copy
// goes to a local file at disk speed, never to a network client at its
// pace. BackupFile copies a file no process runs on, under the shared
// lock. Verify checks a copy (or a file about to be restored) without
// changing it: the header pages, every page, and parley's buckets and
// schema version. Lock takes the running Store's lock without reading the
// file, for parley restore to hold while it renames another file into
// place; an Open that waited for the old file's lock meanwhile sees that
// the path names another file once it holds it, and opens the path again
// (openDB), so no daemon runs on the file restore set aside.
package bolt
