package core

import (
	"context"
	"time"
)

// Lifetime is how long a platform message parley sent or received is kept
// before the cleanup ledger deletes it.
type Lifetime string

// Lifetimes (see the cleanup package for the rules).
const (
	// LifetimeNextNotice: deleted by the next notice in the same session
	// and binding, or when output streaming starts.
	LifetimeNextNotice Lifetime = "next_notice"
	// LifetimeNextInput: deleted by the person's next input in the session.
	LifetimeNextInput Lifetime = "next_input"
	// LifetimeTurnComplete: deleted when the agent's turn completes.
	LifetimeTurnComplete Lifetime = "turn_complete"
	// LifetimeManual: never deleted automatically (not recorded).
	LifetimeManual Lifetime = "manual"
)

// CleanupEntry is one row of the pending-deletion ledger.
type CleanupEntry struct {
	Session  SessionID  `json:"session_id"`
	Ref      MessageRef `json:"ref"` // Ref.Adapter owns the message
	Lifetime Lifetime   `json:"lifetime"`
	// Others is true for a message a person wrote (deleting it needs
	// Capabilities.DeleteOthers).
	Others  bool      `json:"others,omitempty"`
	Created time.Time `json:"created"`
	// Due is set once the row's rule fired: the message is to be deleted,
	// and a restarted daemon replays the deletion.
	Due bool `json:"due,omitempty"`
}

// Append is one atomic inbox write: the message, its dedup key, a change to
// its session, the events it causes and the ledger rows it adds either all
// become durable together or none does.
type Append struct {
	// Message is appended to Message.Session's inbox. The store assigns
	// ID (monotonic across the store) and Time (if zero).
	Message Message
	// DedupKey, when set, makes the append happen at most once: a second
	// Append with the same key writes nothing and returns the first
	// message with Duplicate set. Keys are kept for the daemon's
	// retention (30 days by default), far longer than platforms
	// redeliver, and then pruned.
	DedupKey string
	// Update, when set, changes the session in the same transaction. It
	// may run more than once and must only assign.
	Update func(*Session)
	// Events are appended to the event log after the message. Each gets
	// Seq and, if zero, Time; an event whose Message is non-nil gets the
	// stored message.
	Events []Event
	// Cleanup rows are added to the ledger.
	Cleanup []CleanupEntry
}

// AppendResult is what Store.Append stored.
type AppendResult struct {
	Message   Message
	Session   Session
	Events    []Event
	Duplicate bool
}

// Page sizes of session lists offered to clients (the HTTP API, MCP): a
// page when the client names no size, and the largest it may ask for.
const (
	DefaultSessionPage = 100
	MaxSessionPage     = 1000
)

// SessionQuery selects a page of sessions for Store.SessionsPage.
type SessionQuery struct {
	// After is the cursor a previous page returned: only sessions older
	// than it (ids before it) are listed. Empty starts at the newest.
	After SessionID
	// Status, when set, lists only sessions with that status.
	Status Status
	// Limit is the most sessions returned; <= 0 means no limit.
	Limit int
	// Streaming, when set, lists only sessions whose live output is not
	// final yet (Output set, OutputFinal not): what a restarted daemon
	// shows again.
	Streaming bool
}

// Delivery is a journaled event whose platform operations are not all
// confirmed yet. The journal is written in the same transaction as the
// event, so whatever an agent or a person was told was accepted reaches
// the platforms even if parley dies before sending it.
type Delivery struct {
	Event Event
	// Done holds the keys of the operations already confirmed.
	Done []string
}

// Store is parley's durable state. Everything that must survive a restart
// lives here. All methods are safe for concurrent use and return ErrNotFound
// (wrapped) for missing records. A limit <= 0 means no limit. Callbacks
// (UpdateSession's fn, Append.Update) run inside the store's write
// transaction and must not call the store.
type Store interface {
	// CreateSession stores a new session and its events. ErrExists if the
	// id is taken.
	CreateSession(ctx context.Context, s Session, events ...Event) (Session, []Event, error)
	// Session returns one session.
	Session(ctx context.Context, id SessionID) (Session, error)
	// Sessions returns all sessions, oldest first.
	Sessions(ctx context.Context) ([]Session, error)
	// SessionsPage returns up to q.Limit sessions, newest first by id
	// (that is, by creation), and the cursor of the next page: "" when
	// there is no more. Its cost follows the page, not the number of
	// sessions stored (plus the sessions skipped by q.Status).
	SessionsPage(ctx context.Context, q SessionQuery) ([]Session, SessionID, error)
	// SessionAt returns the session bound at place on adapter.
	SessionAt(ctx context.Context, adapter AdapterName, place Place) (Session, error)
	// UpdateSession applies fn to the stored session and stores the result
	// together with events, atomically. fn may run more than once and must
	// only assign; an error from fn aborts the update and is returned.
	UpdateSession(ctx context.Context, id SessionID, fn func(*Session) error, events ...Event) (Session, []Event, error)

	// Append durably appends one inbox message (see Append).
	Append(ctx context.Context, a Append) (AppendResult, error)
	// Deduped returns the message appended with dedup key, if any: a
	// handler checks it before refusing a redelivered command for a state
	// the command itself caused (a /close redelivered after it closed).
	Deduped(ctx context.Context, key string) (Message, bool, error)
	// Inbox returns up to limit messages with ids strictly after after
	// (everything when after is empty), oldest first. An empty session
	// means every session.
	Inbox(ctx context.Context, session SessionID, after MessageID, limit int) ([]Message, error)

	// InboxTail returns the newest n messages, oldest first; an empty
	// session means every session. It reads backwards, so its cost does
	// not grow with the inbox.
	InboxTail(ctx context.Context, session SessionID, n int) ([]Message, error)

	// AppendEvents appends events without an inbox message (output,
	// status) and returns them with Seq set.
	AppendEvents(ctx context.Context, events ...Event) ([]Event, error)
	// EventsSince returns up to limit events with Seq > after, oldest
	// first. It returns ErrEventsTruncated when some of them were already
	// dropped from the bounded log.
	EventsSince(ctx context.Context, after uint64, limit int) ([]Event, error)
	// LastEventSeq is the Seq of the newest event (0 when none).
	LastEventSeq(ctx context.Context) (uint64, error)

	// AddCleanup records ledger rows (replacing rows for the same Ref).
	AddCleanup(ctx context.Context, rows ...CleanupEntry) error
	// Cleanup returns the ledger rows of a session, oldest first; an empty
	// session means all rows.
	Cleanup(ctx context.Context, session SessionID) ([]CleanupEntry, error)
	// RemoveCleanup deletes the rows for refs; missing rows are no error.
	RemoveCleanup(ctx context.Context, refs ...MessageRef) error

	// Deliveries returns up to limit journaled events (see
	// Event.Journaled) with Seq > after whose delivery is not finished,
	// oldest first, each with the keys of its operations confirmed so far.
	Deliveries(ctx context.Context, after uint64, limit int) ([]Delivery, error)
	// ConfirmDelivery records that the operation key of the journaled
	// event seq is done (the platform confirmed it, or refused it for
	// good); with last, the event's delivery is finished and it leaves the
	// journal. Confirming an event no longer journaled is no error.
	ConfirmDelivery(ctx context.Context, seq uint64, key string, last bool) error

	// Cursor returns an adapter's saved position (a Telegram update offset,
	// a Matrix next_batch), or "" when none was saved.
	Cursor(ctx context.Context, name string) (string, error)
	// SetCursor durably saves a position.
	SetCursor(ctx context.Context, name, value string) error

	// Close flushes and closes the store.
	Close() error
}
