package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// The dispatchers of two instances, each with a store (a pool) of its own
// on one PostgreSQL, a bus, an outbox and the claims loop, deliver to one
// fake platform; every event is published to both, as the follower of the
// event log does. Real time: the claims expire by the database's clock.

// The claims' timings. The claims are judged by the database's clock, which
// no fake clock reaches, so they are real time: an instance keeps its claim
// only while its renewals come within the TTL, and a takeover waits for the
// TTL. claimRenew is short and claimTTL long enough that a renewal delayed
// by a loaded machine (by up to some 3.7 s: the instance stops sending at
// claimTTL − claimTTL/5 after its last renewal) loses nothing; no test
// bounds how long anything took.
const (
	claimTTL   = 5 * time.Second
	claimRenew = 250 * time.Millisecond
	claimScan  = 100 * time.Millisecond
)

type node struct {
	name   string
	st     *Store
	bus    *core.MemBus
	out    *delivery.Outbox
	d      *delivery.Dispatcher
	sent   atomic.Int64
	onSent func(n int64)
	stop   func()

	mu sync.Mutex
	// windows are the times from the platform's answer to the durable
	// confirmation: the repeat window (DispatcherOptions.OnConfirmed).
	windows []time.Duration
}

func startNode(t *testing.T, name, url string, fk *fake.Adapter) *node {
	t.Helper()
	n := &node{name: name, st: openURL(t, url, storetest.Options{}), bus: core.NewMemBus(0)}
	n.out = delivery.NewOutbox(delivery.OutboxOptions{}, fk)
	n.d = delivery.NewDispatcher(n.st, delivery.NewRouter(fk), n.out, delivery.DispatcherOptions{
		OnSent: func(context.Context, delivery.Sent) {
			c := n.sent.Add(1)
			if n.onSent != nil {
				n.onSent(c)
			}
		},
		OnConfirmed: func(_ core.AdapterName, w time.Duration) {
			n.mu.Lock()
			n.windows = append(n.windows, w)
			n.mu.Unlock()
		},
		Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelWarn})).With("instance", name),
		Claims: delivery.ClaimOptions{Store: n.st, Instance: core.InstanceID(name), TTL: claimTTL, Renew: claimRenew, Scan: claimScan}})
	sub, unsubscribe := n.bus.Subscribe(4096, false)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { n.d.Run(ctx, sub) })
	wg.Go(func() { n.d.RunClaims(ctx) })
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			unsubscribe()
			n.out.Close()
			n.d.StopTyping()
		})
	}
	t.Cleanup(n.stop)
	return n
}

// testLog writes an instance's warnings to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// waitFor polls cond until it holds or 20 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !cond() {
		select {
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

var claimPlace = core.Place{Chat: "team", Thread: "1"}

func boundAt(t *testing.T, st *Store, nodes ...*node) core.SessionID {
	t.Helper()
	now := time.Now()
	s := core.Session{ID: core.NewSessionID(now), Title: "shared", Status: core.StatusIdle, Created: now, Updated: now,
		Bindings: map[core.AdapterName]core.Binding{"fake": {Adapter: "fake", Place: claimPlace}}}
	_, events, err := st.CreateSession(context.Background(), s,
		core.Event{Kind: core.EventSessionCreated, Session: s.ID, Status: s.Status, Title: s.Title})
	storetest.Must(t, err)
	for _, n := range nodes {
		for _, e := range events {
			n.bus.Publish(e)
		}
	}
	return s.ID
}

func postAt(t *testing.T, st *Store, id core.SessionID, text string) []core.Event {
	t.Helper()
	msg := core.Message{Session: id, Role: core.RoleAssistant, Mime: core.MimeMarkdown, Content: text}
	res, err := st.Append(context.Background(), core.Append{Message: msg,
		Events: []core.Event{{Kind: core.EventAssistant, Session: id, Message: &msg}}})
	storetest.Must(t, err)
	return res.Events
}

// shownCount is how many times each text of kind was shown at claimPlace.
func shownCount(fk *fake.Adapter) map[string]int {
	out := map[string]int{}
	for _, m := range fk.Messages(claimPlace) {
		if m.Kind == core.KindAssistant {
			out[m.Text]++
		}
	}
	return out
}

// Two instances receive the same 200 journaled messages, written through
// both and published to both at once: each is shown exactly once, and the
// journal ends empty. With fsync on, as in production, it reports the
// repeat window: from the platform's answer to the confirmation's commit.
func TestDispatchersShareTheJournal(t *testing.T) {
	t.Parallel()
	srv := pgtest.StartDurable(t)
	fk := fake.New("fake", core.Capabilities{})
	a, b := startNode(t, "a", srv.URL, fk), startNode(t, "b", srv.URL, fk)
	id := boundAt(t, a.st, a, b)
	const n = 200
	var wg sync.WaitGroup
	for _, w := range []*node{a, b} {
		wg.Go(func() {
			for i := range n / 2 {
				evs := postAt(t, w.st, id, fmt.Sprintf("%s %d", w.name, i))
				// The writer's own bus first, the other's a moment later.
				for _, to := range []*node{w, map[*node]*node{a: b, b: a}[w]} {
					for _, e := range evs {
						to.bus.Publish(e)
					}
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every message shown", func() bool { return len(shownCount(fk)) == n })
	waitFor(t, "an empty journal", func() bool {
		ds, err := a.st.Deliveries(context.Background(), 0, 0)
		return err == nil && len(ds) == 0
	})
	for text, c := range shownCount(fk) {
		if c != 1 {
			t.Errorf("%q shown %d times", text, c)
		}
	}
	if got := a.sent.Load() + b.sent.Load(); got != n {
		t.Errorf("%d sends, want %d", got, n)
	}
	t.Logf("a sent %d, b sent %d", a.sent.Load(), b.sent.Load())
	var ws []time.Duration
	// OnConfirmed runs just after the commit that empties the journal.
	waitFor(t, "every confirmation reported", func() bool {
		ws = ws[:0]
		for _, nd := range []*node{a, b} {
			nd.mu.Lock()
			ws = append(ws, nd.windows...)
			nd.mu.Unlock()
		}
		return len(ws) >= n
	})
	slices.Sort(ws)
	if len(ws) != n {
		t.Fatalf("%d confirmations, want %d", len(ws), n)
	}
	t.Logf("repeat window (answer to confirmation committed), fsync on: p50 %v, p99 %v, max %v",
		ws[n/2].Round(time.Microsecond), ws[n*99/100].Round(time.Microsecond), ws[n-1].Round(time.Microsecond))
}

// An instance that dies (outbox closed, connections closed, no release)
// after sending the first of a message's three parts keeps its claim until
// it expires by the database's clock; then the other instance sends the
// two other parts, once each, and not the first again.
func TestDispatcherTakesOverFromADeadInstance(t *testing.T) {
	srv := pgtest.Start(t)
	fk := fake.New("fake", core.Capabilities{MaxLength: 20})
	a, b := startNode(t, "a", srv.URL, fk), startNode(t, "b", srv.URL, fk)
	a.onSent = func(n int64) {
		if n == 1 {
			a.out.Hold("fake", true) // what a sends after its first part waits
		}
	}
	var bFirst atomic.Pointer[time.Time]
	b.onSent = func(n int64) {
		if n == 1 {
			now := time.Now()
			bFirst.Store(&now)
		}
	}
	id := boundAt(t, a.st, a, b)
	evs := postAt(t, a.st, id, strings.Repeat("first part ", 2)+"\n\n"+strings.Repeat("second part ", 1)+"\n\n"+strings.Repeat("third part ", 1))
	seq := evs[0].Seq
	// a claims it first: b is told once a dispatched it.
	for _, e := range evs {
		a.bus.Publish(e)
	}
	waitFor(t, "a's dispatch", func() bool { return a.d.Seen() >= seq })
	for _, e := range evs {
		b.bus.Publish(e)
	}
	waitFor(t, "a's first part confirmed", func() bool {
		ds, err := b.st.Deliveries(context.Background(), 0, 0)
		return err == nil && len(ds) == 1 && ds[0].Event.Seq == seq && len(ds[0].Done) == 1
	})
	if got := shownCount(fk); len(got) != 1 {
		t.Fatalf("shown before a died: %v; want only the first part", got)
	}
	// When a's claim expires at the earliest, by the database's clock (a
	// renewal after this read only makes it later).
	var until time.Time
	storetest.Must(t, b.st.pool.QueryRow(context.Background(),
		`SELECT claim_until FROM journal WHERE seq = $1 AND claimed_by = 'a'`, int64(seq)).Scan(&until))
	a.stop()
	storetest.Must(t, a.st.Close())
	died := time.Now()
	waitFor(t, "b's takeover", func() bool { return len(shownCount(fk)) == 3 })
	t.Logf("the other parts shown %v after a died (claim ttl %v, renewed every %v, scan every %v)",
		time.Since(died).Round(time.Millisecond), claimTTL, claimRenew, claimScan)
	waitFor(t, "an empty journal", func() bool {
		ds, err := b.st.Deliveries(context.Background(), 0, 0)
		return err == nil && len(ds) == 0
	})
	for text, c := range shownCount(fk) {
		if c != 1 {
			t.Errorf("%q shown %d times", text, c)
		}
	}
	if b.sent.Load() != 2 {
		t.Errorf("b sent %d parts, want the 2 a had not", b.sent.Load())
	}
	// The database and this process read one clock.
	if first := bFirst.Load(); first == nil || first.Before(until) {
		t.Errorf("b sent at %v, before a's claim expired at %v", first, until)
	}
}
