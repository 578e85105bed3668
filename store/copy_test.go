package store

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// counted is a store of nothing but counts per kind: an Exporter yielding
// that many empty records, an Importer that keeps what it is given, less
// what it drops.
type counted struct {
	n    map[Kind]int
	drop Kind // an importer that loses one record of this kind
}

func (c *counted) Counters(context.Context) (Counters, error)   { return Counters{LastSeq: 7}, nil }
func (c *counted) Count(_ context.Context, k Kind) (int, error) { return c.n[k], nil }
func (c *counted) Export(_ context.Context, k Kind, fn func(Record) error) error {
	for range c.n[k] {
		if err := fn(Record{}); err != nil {
			return err
		}
	}
	return nil
}
func (c *counted) Import(_ context.Context, _ Counters, src func(Kind, func(Record) error) error) error {
	for _, k := range Kinds {
		if c.n[k] > 0 {
			return ErrNotEmpty
		}
	}
	for _, k := range Kinds {
		if err := src(k, func(Record) error { c.n[k]++; return nil }); err != nil {
			return err
		}
		if k == c.drop && c.n[k] > 0 {
			c.n[k]--
		}
	}
	return nil
}

// Copy reports the counts per kind, and fails naming the kind whose counts
// differ after the copy.
func TestCopyCountsEveryKind(t *testing.T) {
	ctx := context.Background()
	src := &counted{n: map[Kind]int{KindSessions: 2, KindMessages: 5, KindJournal: 1}}
	counts, err := Copy(ctx, &counted{n: map[Kind]int{}}, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != len(Kinds) || counts[0] != (KindCount{KindSessions, 2, 2}) {
		t.Errorf("counts %+v", counts)
	}

	_, err = Copy(ctx, &counted{n: map[Kind]int{}, drop: KindMessages}, src)
	if !errors.Is(err, ErrCountMismatch) || !strings.Contains(err.Error(), "messages: 5 in the source, 4 in the target") {
		t.Errorf("a lost message: err = %v", err)
	}
	if _, err := Copy(ctx, &counted{n: map[Kind]int{KindCursors: 1}}, src); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("into a non-empty store: err = %v", err)
	}
}
