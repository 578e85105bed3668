package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store"
	"github.com/parley-chat/parley/store/bolt"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// fillBolt writes one of everything a data directory holds through the
// bolt store's API, and returns the dedup keys and cursor names it used.
func fillBolt(t *testing.T, ctx context.Context, b *bolt.Store) (keys, cursors []string) {
	t.Helper()
	for i := range 3 {
		s := storetest.CreateSession(t, b, core.Session{Title: fmt.Sprintf("s%d", i)})
		place := core.Place{Chat: "-100", Thread: fmt.Sprint(10 + i)}
		_, _, err := b.UpdateSession(ctx, s.ID, func(s *core.Session) error {
			s.Bindings = map[core.AdapterName]core.Binding{"telegram": {Adapter: "telegram", Place: place,
				Output: core.OutputState{Ref: core.MessageRef{Adapter: "telegram", Place: place, ID: "77"}, Digest: "d", Turn: 2},
				Meta:   json.RawMessage(`{"header":"1.5"}`)}}
			s.Output, s.Status = "streaming…", core.StatusWorking
			return nil
		}, core.Event{Kind: core.EventSessionUpdated, Session: s.ID})
		must(t, err)
		for j := range 4 {
			key := fmt.Sprintf("telegram\x00%d-%d", i, j)
			keys = append(keys, key)
			res, err := b.Append(ctx, core.Append{
				Message:  core.Message{Session: s.ID, Role: core.RoleUser, Mime: core.MimeMarkdown, Content: fmt.Sprintf("m%d.%d", i, j)},
				DedupKey: key,
				Events:   []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}},
				Cleanup: []core.CleanupEntry{{Ref: core.MessageRef{Adapter: "telegram", Place: place, ID: fmt.Sprint(100 + j)},
					Lifetime: core.LifetimeNextInput, Others: true}},
			})
			must(t, err)
			if res.Duplicate {
				t.Fatal("duplicate")
			}
		}
		evs, err := b.AppendEvents(ctx, core.Event{Kind: core.EventAssistant, Session: s.ID, Text: "answer"},
			core.Event{Kind: core.EventOutput, Session: s.ID, Text: "done", Final: true})
		must(t, err)
		must(t, b.ConfirmDelivery(ctx, evs[0].Seq, "telegram/send", false))
		if i == 0 {
			must(t, b.ConfirmDelivery(ctx, evs[1].Seq, "telegram/edit", true))
		}
		name := fmt.Sprintf("telegram/offset/%d", i)
		cursors = append(cursors, name)
		must(t, b.SetCursor(ctx, name, fmt.Sprint(1000+i)))
	}
	must(t, b.AddCleanup(ctx, core.CleanupEntry{Session: "x", Ref: core.MessageRef{Adapter: "slack", Place: core.Place{Chat: "C1", Thread: "1.1"}, ID: "2.2"},
		Lifetime: core.LifetimeTurnComplete, Due: true}))
	now := time.Now().UTC().Round(0)
	for _, code := range []string{"AAAA-1111", "BBBB-2222"} {
		must(t, b.PutPairing(ctx, core.PairingRequest{Code: code, Origin: "telegram", Actor: core.Actor{ID: code, Name: "n"},
			Place: core.Place{Chat: "5"}, Created: now, Told: now}))
	}
	_, err := b.ApprovePairing(ctx, "AAAA-1111", now)
	must(t, err)
	return keys, cursors
}

// A bbolt store copied into PostgreSQL reads back the same through the
// PostgreSQL store's API, goes on with later ids and seqs, and a second
// copy into the now non-empty database is refused.
func TestCopyFromBolt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b, err := bolt.Open(filepath.Join(t.TempDir(), "parley.db"), bolt.Options{NoSync: true})
	must(t, err)
	defer b.Close()
	keys, cursors := fillBolt(t, ctx, b)

	srv := pgtest.Start(t)
	p := openURL(t, srv.URL, storetest.Options{})
	counts, err := store.Copy(ctx, p, b)
	must(t, err)
	want := map[store.Kind]int{store.KindSessions: 3, store.KindPlaces: 3, store.KindMessages: 12, store.KindDedup: 12,
		store.KindEvents: 21, store.KindJournal: 5, store.KindLedger: 13, store.KindCursors: 3, store.KindPairings: 1, store.KindAdmissions: 1}
	for _, c := range counts {
		if c.Source != c.Target || c.Target != want[c.Kind] {
			t.Errorf("%s: source %d, target %d, want %d", c.Kind, c.Source, c.Target, want[c.Kind])
		}
	}

	same := func(what string, get func(core.Store) (any, error)) {
		t.Helper()
		x, err := get(b)
		must(t, err)
		y, err := get(p)
		must(t, err)
		if !reflect.DeepEqual(x, y) {
			t.Errorf("%s differ:\nbolt     %+v\npostgres %+v", what, x, y)
		}
	}
	same("sessions", func(s core.Store) (any, error) { return s.Sessions(ctx) })
	same("streaming page", func(s core.Store) (any, error) {
		l, _, err := s.SessionsPage(ctx, core.SessionQuery{Streaming: true})
		return l, err
	})
	same("session at a place", func(s core.Store) (any, error) {
		return s.SessionAt(ctx, "telegram", core.Place{Chat: "-100", Thread: "11"})
	})
	same("inbox", func(s core.Store) (any, error) { return s.Inbox(ctx, "", "", 0) })
	sessions, err := b.Sessions(ctx)
	must(t, err)
	same("a session's inbox", func(s core.Store) (any, error) { return s.Inbox(ctx, sessions[1].ID, "", 0) })
	same("events", func(s core.Store) (any, error) { return s.EventsSince(ctx, 0, 0) })
	same("last seq", func(s core.Store) (any, error) { return s.LastEventSeq(ctx) })
	same("journal", func(s core.Store) (any, error) { return s.Deliveries(ctx, 0, 0) })
	same("ledger", func(s core.Store) (any, error) { return s.Cleanup(ctx, "") })
	same("a session's ledger", func(s core.Store) (any, error) { return s.Cleanup(ctx, sessions[2].ID) })
	for _, k := range keys {
		same("dedup "+k, func(s core.Store) (any, error) {
			m, ok, err := s.Deduped(ctx, k)
			return fmt.Sprint(m, ok), err
		})
	}
	for _, c := range cursors {
		same("cursor "+c, func(s core.Store) (any, error) { return s.Cursor(ctx, c) })
	}
	same("pairings", func(s core.Store) (any, error) { return s.(core.PairingStore).Pairings(ctx) })
	same("admissions", func(s core.Store) (any, error) { return s.(core.PairingStore).Admissions(ctx) })

	// A redelivery is recognised in the copy; a new message and event
	// come after the copied ones.
	dup, err := p.Append(ctx, core.Append{Message: core.Message{Session: sessions[0].ID, Role: core.RoleUser, Content: "again"}, DedupKey: keys[0]})
	must(t, err)
	if !dup.Duplicate {
		t.Error("a copied dedup key does not recognise its redelivery")
	}
	last, err := b.Inbox(ctx, "", "", 0)
	must(t, err)
	lastSeq, err := b.LastEventSeq(ctx)
	must(t, err)
	res, err := p.Append(ctx, core.Append{Message: core.Message{Session: sessions[0].ID, Role: core.RoleUser, Content: "new"},
		Events: []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}}})
	must(t, err)
	if res.Message.ID <= last[len(last)-1].ID || res.Events[0].Seq != lastSeq+1 {
		t.Errorf("after the copy: id %s seq %d; want after %s and %d", res.Message.ID, res.Events[0].Seq, last[len(last)-1].ID, lastSeq+1)
	}

	if _, err := store.Copy(ctx, p, b); !errors.Is(err, store.ErrNotEmpty) {
		t.Errorf("second copy: err = %v, want ErrNotEmpty", err)
	}
}

// BenchmarkCopyFromBolt measures parley migrate's copy: a data directory
// of 1,000 sessions with 20 messages each (a dedup key and an event per
// message) copied into a durable PostgreSQL and counted; it reports the
// records copied per second.
func BenchmarkCopyFromBolt(b *testing.B) {
	ctx := context.Background()
	src, err := bolt.Open(filepath.Join(b.TempDir(), "parley.db"), bolt.Options{NoSync: true, MaxEvents: 1 << 30})
	must(b, err)
	defer src.Close()
	for i := range 1000 {
		s := storetest.CreateSession(b, src, core.Session{Title: fmt.Sprint(i)})
		for j := range 20 {
			_, err := src.Append(ctx, core.Append{Message: core.Message{Session: s.ID, Role: core.RoleUser, Mime: core.MimeMarkdown,
				Content: fmt.Sprintf("message %d of session %d, about as long as what people write in a chat", j, i)},
				DedupKey: fmt.Sprintf("telegram\x00%d-%d", i, j), Events: []core.Event{{Kind: core.EventHumanMessage, Message: &core.Message{}}}})
			must(b, err)
		}
	}
	records := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		srv := pgtest.StartDurable(b)
		dst, err := Open(ctx, srv.URL, Options{})
		must(b, err)
		b.StartTimer()
		counts, err := store.Copy(ctx, dst, src)
		must(b, err)
		b.StopTimer()
		records = 0
		for _, c := range counts {
			records += c.Target
		}
		dst.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
