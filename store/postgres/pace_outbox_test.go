package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/fake"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// Three outboxes, each an instance with its own store (pool) on one
// PostgreSQL and its own connection to the platform (a fake adapter), all
// delivering to one group: the platform, which counts per bot, sees the
// group's budget spent once, not three times. Real time: the ledger judges
// by the database's clock.

// platformLog is what the platform saw, from every instance: when each
// call arrived, in one process's clock.
type platformLog struct {
	mu    sync.Mutex
	calls []time.Time
	done  map[string]error
	ended chan struct{} // one per op ended (Done runs on its own goroutine)
}

func newPlatformLog() *platformLog {
	return &platformLog{done: map[string]error{}, ended: make(chan struct{}, 100)}
}

// wait waits until n ops ended.
func (p *platformLog) wait(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(time.Minute)
	for range n {
		select {
		case <-p.ended:
		case <-timeout:
			t.Fatalf("not all of %d ops ended within a minute", n)
		}
	}
}

func (p *platformLog) send(a *fake.Adapter, place core.Place, text string) core.Op {
	return core.Op{Kind: core.OpSend, Adapter: a.Name(), Place: place,
		Run: func(ctx context.Context, _ core.Place) error {
			p.mu.Lock()
			p.calls = append(p.calls, time.Now())
			p.mu.Unlock()
			_, err := a.Send(ctx, place, core.OutMessage{Text: text})
			return err
		},
		Done: func(err error) {
			p.mu.Lock()
			p.done[text] = err
			p.mu.Unlock()
			p.ended <- struct{}{}
		}}
}

// paceInstances starts n outboxes on the ledgers of n stores on url, each
// with its own fake platform declaring caps.
func paceInstances(t *testing.T, url string, n int, caps core.Capabilities) ([]*delivery.Outbox, []*fake.Adapter, []*Store) {
	t.Helper()
	var outs []*delivery.Outbox
	var fakes []*fake.Adapter
	var stores []*Store
	for i := range n {
		st := openInstance(t, url, core.InstanceID(fmt.Sprint("instance-", i)))
		stores = append(stores, st)
		fk := fake.New("telegram", caps)
		o := delivery.NewOutbox(delivery.OutboxOptions{Ledger: st,
			Logger: slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("instance", i)}, fk)
		t.Cleanup(o.Close)
		outs = append(outs, o)
		fakes = append(fakes, fk)
	}
	return outs, fakes, stores
}

func drainAll(t *testing.T, outs []*delivery.Outbox) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range outs {
		if err := o.Drain(ctx); err != nil {
			t.Fatalf("an outbox did not drain: %v", err)
		}
	}
}

func TestOutboxesShareAGroupsBudget(t *testing.T) {
	srv := pgtest.Start(t)
	budget := core.Rate{N: 5, Per: 500 * time.Millisecond}
	outs, fakes, _ := paceInstances(t, srv.URL, 3, core.Capabilities{Limits: []core.Limit{{Scope: core.ScopeGroup, Rate: budget}}})
	p := newPlatformLog()
	const each = 10
	for i, o := range outs {
		for j := range each {
			place := core.Place{Chat: "-100123", Thread: fmt.Sprint(i*each + j)}
			o.Enqueue(p.send(fakes[i], place, fmt.Sprint("instance ", i, " message ", j)))
		}
	}
	drainAll(t, outs)
	p.wait(t, 3*each)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.done) != 3*each || len(p.calls) != 3*each {
		t.Fatalf("%d ops ended after %d calls, want %d of each", len(p.done), len(p.calls), 3*each)
	}
	for text, err := range p.done {
		if err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
	// The ledger stamps a slot a moment before the call reaches the
	// platform, and that moment varies with scheduling: the window is
	// checked with the fake platform's own allowance for it (fake.Adapter
	// Slack, 100 ms), as a real platform's is blurred by the network.
	slack := fake.New("x", core.Capabilities{}).Slack
	calls := slices.SortedFunc(slices.Values(p.calls), time.Time.Compare)
	tightest := time.Hour
	for i := budget.N; i < len(calls); i++ {
		d := calls[i].Sub(calls[i-budget.N])
		tightest = min(tightest, d)
		if d < budget.Per-slack {
			t.Errorf("calls %d and %d reached the platform %s apart: %d in %s, over the group's %d per %s",
				i-budget.N, i, d, budget.N+1, d, budget.N, budget.Per)
		}
	}
	t.Logf("%d sends from 3 instances in %s; any %d calls in a row spanned at least %s (budget %d per %s)",
		len(calls), calls[len(calls)-1].Sub(calls[0]), budget.N+1, tightest, budget.N, budget.Per)
}

// A 429 at one instance pauses the group at the other two: none of their
// calls to it arrives before the retry_after has passed.
func TestOutboxesShareA429(t *testing.T) {
	ctx := context.Background()
	srv := pgtest.Start(t)
	outs, fakes, stores := paceInstances(t, srv.URL, 3, core.Capabilities{Limits: []core.Limit{
		{Scope: core.ScopeGroup, Rate: core.Rate{N: 20, Per: time.Minute}}}})
	const retryAfter = 1500 * time.Millisecond
	fakes[0].FailNext("send", &core.RateLimitError{RetryAfter: retryAfter, Scope: core.ScopeGroup})
	p := newPlatformLog()
	outs[0].Enqueue(p.send(fakes[0], core.Place{Chat: "-100123", Thread: "1"}, "refused"))
	// Until the instance that met the 429 wrote it to the ledger.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := stores[1].pool.QueryRow(ctx, `SELECT count(*) FROM pace WHERE paused_until > now()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the 429 was not written to the ledger within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	p.mu.Lock()
	refusedAt := p.calls[0]
	p.mu.Unlock()
	for i, o := range outs[1:] {
		for j := range 2 {
			o.Enqueue(p.send(fakes[i+1], core.Place{Chat: "-100123", Thread: fmt.Sprint(10*i + j)}, fmt.Sprint(i+1, "/", j)))
		}
	}
	drainAll(t, outs)
	p.wait(t, 5)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.calls) != 6 || len(p.done) != 5 {
		t.Fatalf("%d calls and %d ops ended, want 6 calls (one refused) for 5 ops", len(p.calls), len(p.done))
	}
	for text, err := range p.done {
		if err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
	for _, at := range p.calls[1:] {
		if d := at.Sub(refusedAt); d < retryAfter {
			t.Errorf("a call reached the group %s after the 429, within its retry_after of %s", d, retryAfter)
		}
	}
}

// With the database down, an outbox delivers by its own count (nothing
// waits for the database, nothing is lost), and once the database is back
// it counts in the ledger again, within the 5 s it leaves it alone.
func TestOutboxPacesAloneWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := pgtest.Start(t)
	outs, fakes, stores := paceInstances(t, srv.URL, 1, core.Capabilities{Limits: []core.Limit{
		{Scope: core.ScopeGroup, Rate: core.Rate{N: 1000, Per: time.Minute}}}})
	p := newPlatformLog()
	storetest.Must(t, srv.Stop("fast"))
	for i := range 3 {
		outs[0].Enqueue(p.send(fakes[0], core.Place{Chat: "-100123", Thread: fmt.Sprint(i)}, fmt.Sprint("while down ", i)))
	}
	began := time.Now()
	p.wait(t, 3)
	t.Logf("3 ops delivered %s after the database stopped", time.Since(began))
	storetest.Must(t, srv.Start())
	began = time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		outs[0].Enqueue(p.send(fakes[0], core.Place{Chat: "-100123", Thread: "after"}, fmt.Sprint("after ", i)))
		p.wait(t, 1)
		var n int
		err := stores[0].pool.QueryRow(ctx, `SELECT coalesce(sum(cardinality(takes)), 0) FROM pace`).Scan(&n)
		if err == nil && n > 0 {
			t.Logf("the ledger was used again %s after the database came back", time.Since(began))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the outbox did not use the ledger again within 30 s of the database's return (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for text, err := range p.done {
		if err != nil {
			t.Errorf("%s: %v", text, err)
		}
	}
}
