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
//	                  id's 6-byte millisecond time and 10 bytes of entropy
//	sessions          session id → Session JSON
//	places            lp(adapter) lp(chat) lp(thread) → session id
//	inbox             message id → Message JSON (its "id" is left empty: the
//	                  key is the id)
//	inbox_by_session  lp(session id) message id → empty
//	dedup             Append.DedupKey → message id
//	events            8-byte big-endian seq → flag, [message id], Event JSON
//	ledger            lp(adapter) lp(chat) lp(thread) lp(message id) → CleanupEntry JSON
//	cursors           name → value
//
// lp(x) is x prefixed with its length as a uvarint, so composite keys cannot
// be read two ways whatever bytes the platform ids contain, and a prefix of
// whole parts is a seekable range. The inbox is global and keyed by id so a
// single watermark ("everything after id X") works for one session (a cursor
// seek in inbox_by_session) and for all of them (a seek in inbox). Messages
// are never deleted.
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
// # Writes
//
// Every write goes through one committer goroutine that runs all writes
// queued while the previous transaction was committing as one bbolt
// transaction (group commit) and answers each caller only after that
// transaction was fsynced. With one writer this is a plain transaction per
// write; with hundreds it amortises one fsync over hundreds of appends. It is
// bbolt's DB.Batch without the fixed delay: Batch waits MaxBatchDelay before
// it starts, which either caps a lone writer at one commit per delay or,
// with a short delay, splits a crowd into small batches. A write function
// runs again when another function of its group fails, so every one starts
// by resetting what it captured, and "not found" or "already exists" are
// results it records, not errors it returns, so that they do not roll back
// the group. Work that does not depend on the transaction (JSON encoding,
// validation, decoding the results) happens in the caller's goroutine so
// the single committer does as little as possible.
package bolt
