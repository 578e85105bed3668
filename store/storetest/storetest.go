// Package storetest is the behavioural test suite of store.Store: what every
// engine (store/bolt, store/postgres) must do the same way, written once and
// run against each. It tests only through the interface; what an engine
// keeps inside (bbolt's buckets and file checks, PostgreSQL's tables) is
// tested in the engine's own package.
//
// An engine's test calls Run with an Engine that opens fresh, empty stores.
// Tests that check what survives a restart close the store and open its data
// again; with Engine.Shared set, the concurrency tests also open several
// instances on the same data at once, as several parley processes on one
// database would.
package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
)

// Store is the interface under test.
type Store = store.Store

// Options are what a test asks of the store it opens.
type Options struct {
	// Now is the store's clock for message and event times and message
	// ids; nil means time.Now.
	Now func() time.Time
	// MaxEvents bounds the event log; zero means the engine's default.
	MaxEvents int
}

// Again opens another Store on the data an Open made, with opts: after the
// test closed the first one (a restart), or next to it (another instance,
// when Engine.Shared). It fails the test when it cannot, and closes what it
// opened when the test ends.
type Again func(t *testing.T, opts Options) Store

// Engine opens the stores the suite tests.
type Engine struct {
	// Open opens a new, empty store with opts and returns it with the way
	// to open its data again. It fails the test when it cannot and closes
	// the store when the test ends; the suite may close it before.
	Open func(t *testing.T, opts Options) (Store, Again)
	// Shared says that several instances may have the same data open at
	// once (PostgreSQL), not only one after the other (bbolt).
	Shared bool
}

// Run runs the whole suite against e, each test in a subtest of its own;
// the subtests run in parallel, each on a store of its own.
func Run(t *testing.T, e Engine) {
	tests := []struct {
		name string
		fn   func(*testing.T, Engine)
	}{
		{"Append", testAppend},
		{"AppendMissingSession", testAppendMissingSession},
		{"AppendConcurrentWithFailures", testAppendConcurrentWithFailures},
		{"AppendSessionResult", testAppendSessionResult},
		{"InboxPaging", testInboxPaging},
		{"InboxTail", testInboxTail},
		{"IDsMonotonicConcurrent", testIDsMonotonicConcurrent},
		{"IDsMonotonicClockBackwardsAndReopen", testIDsMonotonicClockBackwardsAndReopen},
		{"WatermarkReaderSeesEveryMessageOnce", testWatermarkReader},
		{"DuplicatesRace", testDuplicatesRace},
		{"Deduped", testDeduped},
		{"CanceledContextWritesNothing", testCanceledContextWritesNothing},
		{"CreateSession", testCreateSession},
		{"SessionsOldestFirst", testSessionsOldestFirst},
		{"PlaceIndexFollowsBindings", testPlaceIndexFollowsBindings},
		{"PlaceKeysAreUnambiguous", testPlaceKeysAreUnambiguous},
		{"UpdateSession", testUpdateSession},
		{"UpdateSessionCopiesDoNotAlias", testUpdateSessionCopiesDoNotAlias},
		{"ApprovalsSurviveRestart", testApprovalsSurviveRestart},
		{"SessionAgentSurvivesRestart", testSessionAgentSurvivesRestart},
		{"SessionsPage", testSessionsPage},
		{"SessionsPageStreaming", testSessionsPageStreaming},
		{"EventSeq", testEventSeq},
		{"EventLogBounded", testEventLogBounded},
		{"JournalKeepsWhatCannotBeDerived", testJournalKeepsWhatCannotBeDerived},
		{"ConfirmDelivery", testConfirmDelivery},
		{"JournalOutlivesEventLogTrim", testJournalOutlivesEventLogTrim},
		{"Ledger", testLedger},
		{"LedgerBySession", testLedgerBySession},
		{"Cursors", testCursors},
		{"Prune", testPrune},
		{"PruneStopsWithContext", testPruneStopsWithContext},
		{"Pairing", testPairing},
		{"CheckAndClose", testCheckAndClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, e)
		})
	}
}

// Clock is a settable clock for Options.Now.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at a fixed instant.
func NewClock() *Clock {
	return &Clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set sets the clock's time.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// CreateSession creates sess in s or fails the test.
func CreateSession(tb testing.TB, s core.Store, sess core.Session) core.Session {
	tb.Helper()
	got, _, err := s.CreateSession(context.Background(), sess)
	if err != nil {
		tb.Fatalf("CreateSession: %v", err)
	}
	return got
}

// AppendText appends a user message with text to session or fails the test.
func AppendText(tb testing.TB, s core.Store, session core.SessionID, text string) core.Message {
	tb.Helper()
	res, err := s.Append(context.Background(), core.Append{Message: core.Message{
		Session: session, Role: core.RoleUser, Mime: core.MimeMarkdown, Content: text,
	}})
	if err != nil {
		tb.Fatalf("Append %q: %v", text, err)
	}
	return res.Message
}

// IDs returns the ids of ms.
func IDs(ms []core.Message) []core.MessageID {
	out := make([]core.MessageID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// Contents returns the contents of ms.
func Contents(ms []core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Content
	}
	return out
}

// CheckIncreasing fails unless ids are valid and strictly increasing.
func CheckIncreasing(tb testing.TB, ids []core.MessageID) {
	tb.Helper()
	for i, id := range ids {
		if !core.ValidID(string(id)) {
			tb.Fatalf("id %d %q is not a valid id", i, id)
		}
		if i > 0 && ids[i-1] >= id {
			tb.Fatalf("id %d %q is not after id %d %q", i, id, i-1, ids[i-1])
		}
	}
}

// Bind is a binding of adapter at chat and thread.
func Bind(adapter core.AdapterName, chat, thread string) core.Binding {
	return core.Binding{Adapter: adapter, Place: core.Place{Chat: chat, Thread: thread}}
}

// IDAt is the time-ordered id of time at, the same for the same time.
func IDAt(at time.Time) string { return core.EncodeID(uint64(at.UnixMilli()), [10]byte{1}) }

// Must fails the test on err.
func Must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// appendEvents appends n output events or fails the test.
func appendEvents(tb testing.TB, s core.Store, n int) []core.Event {
	tb.Helper()
	evs := make([]core.Event, n)
	for i := range evs {
		evs[i] = core.Event{Kind: core.EventOutput, Session: "s", Text: "out"}
	}
	got, err := s.AppendEvents(context.Background(), evs...)
	if err != nil {
		tb.Fatalf("AppendEvents: %v", err)
	}
	return got
}
