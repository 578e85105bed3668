package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/parley-chat/parley/core"
)

// Copying a store into another engine (parley migrate): the source lists
// its records kind by kind in a neutral form (Exporter), the target takes
// them all in one transaction that refuses a target holding anything
// (Importer), and Copy then counts every kind on both sides. Records keep
// their ids, seqs and keys, so agents' watermarks, platform dedup and the
// delivery journal carry on where they were.

// Kind is a kind of record, as Copy counts them.
type Kind string

// The kinds, in the order Copy moves and reports them.
const (
	KindSessions   Kind = "sessions"
	KindPlaces     Kind = "bound places"
	KindMessages   Kind = "messages"
	KindDedup      Kind = "dedup keys"
	KindEvents     Kind = "events"
	KindJournal    Kind = "journal entries"
	KindLedger     Kind = "cleanup rows"
	KindCursors    Kind = "cursors"
	KindPairings   Kind = "pairing requests"
	KindAdmissions Kind = "admissions"
)

// Kinds are every kind, in copy order.
var Kinds = []Kind{KindSessions, KindPlaces, KindMessages, KindDedup, KindEvents, KindJournal,
	KindLedger, KindCursors, KindPairings, KindAdmissions}

// Record is one record of a kind; only the fields of its kind are set.
type Record struct {
	// Session, with its bindings and their metadata (KindSessions).
	Session core.Session
	// Message, with its id (KindMessages).
	Message core.Message
	// Key and Value: a dedup key and its message id (KindDedup), a
	// cursor's name and value (KindCursors).
	Key, Value string
	// Adapter and Place are a bound place, whose session is Value
	// (KindPlaces): the index that finds a session by where it lives.
	Adapter core.AdapterName
	Place   core.Place
	// Event, with its Seq (KindEvents, KindJournal). When Ref is set the
	// event carries that inbox message by reference and Event.Message is
	// nil; otherwise Event.Message is what the event holds itself.
	Event core.Event
	Ref   core.MessageID
	// Done are a journal entry's confirmed operations (KindJournal).
	Done []string
	// Cleanup is a ledger row (KindLedger).
	Cleanup core.CleanupEntry
	// Pairing is a pairing request (KindPairings).
	Pairing core.PairingRequest
	// Admission is an admitted person (KindAdmissions).
	Admission core.Admission
}

// Counters are the store-wide positions a copy carries over, so that the
// target goes on assigning after the source's last id and seq.
type Counters struct {
	// LastID is the last message id's 16 bytes as both engines keep it
	// (6 bytes of millisecond time, 10 of entropy); empty when none.
	LastID []byte
	// LastSeq is the last event seq assigned (0 when none).
	LastSeq uint64
}

// Exporter is a store whose whole content can be read out.
type Exporter interface {
	// Counters returns the store's positions.
	Counters(ctx context.Context) (Counters, error)
	// Export calls fn with every record of kind, in key order, from one
	// consistent view; an error from fn stops it and is returned.
	Export(ctx context.Context, kind Kind, fn func(Record) error) error
	// Count returns how many records of kind the store holds.
	Count(ctx context.Context, kind Kind) (int, error)
}

// Importer is a store that can take another's whole content.
type Importer interface {
	// Import writes c and every record src yields, kind by kind, in one
	// transaction. It fails with ErrNotEmpty, writing nothing, when the
	// store holds any record already.
	Import(ctx context.Context, c Counters, src func(kind Kind, fn func(Record) error) error) error
	// Count returns how many records of kind the store holds.
	Count(ctx context.Context, kind Kind) (int, error)
}

// ErrNotEmpty is returned by Import into a store that holds records.
var ErrNotEmpty = errors.New("the target store is not empty")

// KindCount is how many records of a kind a copy found on both sides.
type KindCount struct {
	Kind           Kind
	Source, Target int
}

// Copy copies everything src holds into dst, then counts each kind on both
// sides. It returns the counts, and an error naming every kind whose
// counts differ (ErrCountMismatch). src must not change meanwhile.
func Copy(ctx context.Context, dst Importer, src Exporter) ([]KindCount, error) {
	c, err := src.Counters(ctx)
	if err != nil {
		return nil, fmt.Errorf("copy: read the source's counters: %w", err)
	}
	err = dst.Import(ctx, c, func(kind Kind, fn func(Record) error) error {
		return src.Export(ctx, kind, fn)
	})
	if err != nil {
		return nil, fmt.Errorf("copy: %w", err)
	}
	var counts []KindCount
	var bad []error
	for _, k := range Kinds {
		n, err := src.Count(ctx, k)
		if err != nil {
			return counts, fmt.Errorf("copy: count the source's %s: %w", k, err)
		}
		m, err := dst.Count(ctx, k)
		if err != nil {
			return counts, fmt.Errorf("copy: count the target's %s: %w", k, err)
		}
		counts = append(counts, KindCount{Kind: k, Source: n, Target: m})
		if n != m {
			bad = append(bad, fmt.Errorf("%s: %d in the source, %d in the target", k, n, m))
		}
	}
	if len(bad) > 0 {
		return counts, fmt.Errorf("copy: %w: %w", ErrCountMismatch, errors.Join(bad...))
	}
	return counts, nil
}

// ErrCountMismatch is returned by Copy when a kind's counts differ.
var ErrCountMismatch = errors.New("the counts differ after the copy")
