package postgres

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/follow"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// Instances with different adapters: each runs its dispatcher on its own
// commits (its local bus) and a follower of the event log, whose position
// bounds its scan, as the daemon wires them with several instances.

// shared is one instance of those, with the adapters it runs.
type shared struct {
	name string
	st   *Store
	bus  *core.MemBus
	// sent are, per adapter, the events of the messages this instance
	// sent there, in the order it sent them.
	sent map[core.AdapterName][]uint64
	mu   sync.Mutex
}

func startShared(t *testing.T, name, url string, adapters ...core.Adapter) *shared {
	t.Helper()
	n := &shared{name: name, st: openURL(t, url, storetest.Options{}), bus: core.NewUnorderedMemBus(), sent: map[core.AdapterName][]uint64{}}
	last, err := n.st.LastEventSeq(context.Background())
	storetest.Must(t, err)
	f := follow.New(n.st, core.NewMemBus(last+1), follow.Options{After: last, Local: n.bus, Listener: n.st})
	out := delivery.NewOutbox(delivery.OutboxOptions{}, adapters...)
	d := delivery.NewDispatcher(n.st, delivery.NewRouter(adapters...), out, delivery.DispatcherOptions{
		OnSent: func(_ context.Context, s delivery.Sent) {
			n.mu.Lock()
			n.sent[s.Ref.Adapter] = append(n.sent[s.Ref.Adapter], s.Seq)
			n.mu.Unlock()
		},
		// Debug: each hand-off and takeover is logged, shown when a test fails.
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelDebug})).With("instance", name),
		Claims: delivery.ClaimOptions{Store: n.st, Instance: core.InstanceID(name), TTL: claimTTL, Renew: claimRenew, Scan: claimScan,
			Shared: true, Seen: f.Position}})
	sub, unsubscribe := n.bus.Subscribe(4096, false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	wg.Go(func() { d.Run(ctx, sub) })
	wg.Go(func() { d.RunClaims(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		unsubscribe()
		out.Close()
		d.StopTyping()
	})
	return n
}

func (n *shared) sentOn(a core.AdapterName) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.sent[a])
}

// seqsOn are the events of what n sent on a, in the order it sent them:
// which were sent twice, and when, for a failure's message.
func (n *shared) seqsOn(a core.AdapterName) []uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.sent[a])
}

// sessionAt creates a session bound to places on the named adapters, whose
// last input came from origin, through n.
func (n *shared) sessionAt(t *testing.T, origin core.Origin, bound ...core.AdapterName) core.SessionID {
	t.Helper()
	now := time.Now()
	s := core.Session{ID: core.NewSessionID(now), Title: "shared", Status: core.StatusIdle, Created: now, Updated: now,
		LastInputOrigin: origin, Bindings: map[core.AdapterName]core.Binding{}}
	for _, a := range bound {
		s.Bindings[a] = core.Binding{Adapter: a, Place: claimPlace}
	}
	_, events, err := n.st.CreateSession(context.Background(), s,
		core.Event{Kind: core.EventSessionCreated, Session: s.ID, Status: s.Status, Title: s.Title})
	storetest.Must(t, err)
	for _, e := range events {
		n.bus.Publish(e)
	}
	return s.ID
}

// post commits an assistant message through n and publishes it on n's bus
// alone: the other instances hear of it only from the log.
func (n *shared) post(t *testing.T, id core.SessionID, text string) {
	t.Helper()
	for _, e := range postAt(t, n.st, id, text) {
		n.bus.Publish(e)
	}
}

func emptyJournal(t *testing.T, st *Store) {
	t.Helper()
	waitFor(t, "an empty journal", func() bool {
		ds, err := st.Deliveries(context.Background(), 0, 0)
		return err == nil && len(ds) == 0
	})
}

// The agent answers through an instance that does not run the platform
// the person wrote from: that instance claims the event, has nothing to
// send, and hands it over instead of finishing it; the instance running
// the platform finds it by its scan and shows it once. Nothing goes to the
// first instance's own platform, which the person did not write from.
func TestHandOffToTheInstanceWithThePlatform(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	tg, sl := fake.New("tg", core.Capabilities{}), fake.New("sl", core.Capabilities{})
	a := startShared(t, "a", srv.URL, tg)
	b := startShared(t, "b", srv.URL, sl)
	id := b.sessionAt(t, "tg", "tg", "sl")
	const n = 20
	for i := range n {
		b.post(t, id, "answer "+string(rune('A'+i)))
	}
	waitFor(t, "every answer shown", func() bool { return len(shownCount(tg)) == n })
	emptyJournal(t, a.st)
	for text, c := range shownCount(tg) {
		if c != 1 {
			t.Errorf("%q shown %d times", text, c)
		}
	}
	if got := len(sl.Messages(claimPlace)); got != 0 {
		t.Errorf("%d messages on the platform the person did not write from", got)
	}
	if a.sentOn("tg") != n || b.sentOn("sl") != 0 {
		t.Errorf("a sent %d on tg, b %d on sl", a.sentOn("tg"), b.sentOn("sl"))
	}
}

// A broadcast (the last input came from no platform) to a session bound on
// two platforms, each run by one instance: the committing instance shows it
// on its own and hands it over for the other, which shows it there; each
// platform once, and the event leaves the journal.
func TestHandOffBroadcast(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	tg, sl := fake.New("tg", core.Capabilities{}), fake.New("sl", core.Capabilities{})
	a := startShared(t, "a", srv.URL, tg)
	b := startShared(t, "b", srv.URL, sl)
	id := b.sessionAt(t, core.OriginAPI, "tg", "sl")
	const n = 20
	for i := range n {
		b.post(t, id, "news "+string(rune('A'+i)))
	}
	waitFor(t, "every message shown on both", func() bool { return len(shownCount(tg)) == n && len(shownCount(sl)) == n })
	emptyJournal(t, b.st)
	for _, fk := range []*fake.Adapter{tg, sl} {
		for text, c := range shownCount(fk) {
			if c != 1 {
				t.Errorf("%s: %q shown %d times", fk.Name(), text, c)
			}
		}
	}
	if a.sentOn("tg") != n || b.sentOn("sl") != n {
		t.Errorf("a sent %d on tg, b %d on sl; events a sent on tg: %v, b on sl: %v",
			a.sentOn("tg"), b.sentOn("sl"), a.seqsOn("tg"), b.seqsOn("sl"))
	}
}

// A question shown on a platform only one instance runs is closed by an
// event another instance commits: the withdrawal (the question edited to
// show it closed) is handed over and made once, by the instance running
// that platform.
func TestHandOffQuestionClosed(t *testing.T) {
	t.Parallel()
	srv := pgtest.Start(t)
	tg, sl := fake.New("tg", core.Capabilities{}), fake.New("sl", core.Capabilities{})
	startShared(t, "a", srv.URL, tg)
	b := startShared(t, "b", srv.URL, sl)
	id := b.sessionAt(t, core.OriginAPI, "tg", "sl")
	ref, err := tg.Send(context.Background(), claimPlace, core.OutMessage{Kind: core.KindQuestion, Text: "Deploy?",
		Buttons: []core.Button{{Label: "Yes", Data: "q1:1"}}})
	storetest.Must(t, err)
	evs, err := b.st.AppendEvents(context.Background(), core.Event{Kind: core.EventQuestionClosed, Session: id, QuestionID: "q1",
		Text: "answered", Message: &core.Message{Content: "Deploy?"}, Refs: []core.MessageRef{ref}})
	storetest.Must(t, err)
	for _, e := range evs {
		b.bus.Publish(e)
	}
	emptyJournal(t, b.st)
	var edits []int
	for _, m := range tg.Messages(claimPlace) {
		if m.ID == ref.ID {
			edits = append(edits, m.Edits)
		}
	}
	if len(edits) != 1 || edits[0] != 1 {
		t.Errorf("the question's edits: %v, want one message edited once", edits)
	}
}
