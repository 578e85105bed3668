package orchestrator

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/agent"
	"github.com/parley-chat/parley/mcp/internal/pipenet"
	"github.com/parley-chat/parley/store/follow"
	"github.com/parley-chat/parley/store/postgres"
	"github.com/parley-chat/parley/store/postgres/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// node is one parley instance on a shared PostgreSQL, as the daemon wires
// it: a store of its own (its instance id), a local bus for its commits,
// the cluster feed its follower publishes, the service and the MCP server
// notifying from the feed, and an orchestrator whose session leases go
// through leases (the store, cut off at will).
type node struct {
	id     core.InstanceID
	st     *postgres.Store
	svc    *commands.Service
	leases *cuttable
	run    *running
	stop   func()
}

// cuttable is a Leaser that reaches no store once cut: the instance lost
// its database, for its leases.
type cuttable struct {
	core.Leaser
	cut atomic.Bool
}

func (c *cuttable) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	if c.cut.Load() {
		return core.Lease{}, false, errUnreachable
	}
	return c.Leaser.AcquireLease(ctx, name, ttl)
}

func (c *cuttable) RenewLease(ctx context.Context, l core.Lease, ttl time.Duration) (core.Lease, error) {
	if c.cut.Load() {
		return core.Lease{}, errUnreachable
	}
	return c.Leaser.RenewLease(ctx, l, ttl)
}

func (c *cuttable) ReleaseLease(ctx context.Context, l core.Lease) error {
	if c.cut.Load() {
		return errUnreachable
	}
	return c.Leaser.ReleaseLease(ctx, l)
}

// Short leases, so that a takeover is quick to wait for: a holder cut off
// stops 0.75 s after its last renewal, the row expires 1 s after it.
var testLease = core.HoldOptions{TTL: time.Second, Renew: 250 * time.Millisecond, Retry: 50 * time.Millisecond,
	Margin: 250 * time.Millisecond}

func startNode(t *testing.T, url string, id core.InstanceID, start agent.Driver) *node {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := postgres.Open(ctx, url, postgres.Options{Instance: id})
	if err != nil {
		t.Fatal(err)
	}
	last, err := st.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	local, feed := core.NewUnorderedMemBus(), core.NewMemBus(last+1)
	f := follow.New(st, feed, follow.Options{After: last, Local: local, Listener: st, Logger: testLogger()})
	svc, err := commands.New(ctx, st, local, commands.Options{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcp.New(mcp.Options{Handler: svc, Store: st, Bus: feed, Local: local, Logger: testLogger(), Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	l := pipenet.NewListener()
	hs := &http.Server{Handler: srv.Handler()}
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Run(ctx) })
	wg.Go(func() { srv.Run(ctx) })
	wg.Go(func() { _ = hs.Serve(l) })
	n := &node{id: id, st: st, svc: svc, leases: &cuttable{Leaser: st}}
	n.run = startNodeOrchestrator(t, Options{Endpoint: "http://parley/mcp", HTTPClient: &http.Client{Transport: &http.Transport{DialContext: l.Dial}},
		Agents: claudeAgent(start, true), Leases: n.leases, Lease: testLease, Logger: testLogger().With("instance", id)})
	var once sync.Once
	n.stop = func() {
		once.Do(func() {
			n.run.stop()
			cancel()
			_ = hs.Close()
			wg.Wait()
			srv.Close()
			_ = st.Close()
		})
	}
	t.Cleanup(n.stop)
	return n
}

// startNodeOrchestrator is startOrchestrator on real time.
func startNodeOrchestrator(t *testing.T, opts Options) *running {
	t.Helper()
	o, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{o: o, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- o.Run(ctx) }()
	return r
}

func (n *node) handle(t *testing.T, cmd core.Command) core.Result {
	t.Helper()
	res, err := n.svc.Handle(context.Background(), cmd)
	if err != nil {
		t.Fatalf("%s: %v", cmd.Kind, err)
	}
	return res
}

// finals returns the session's final outputs, from the store.
func (n *node) finals(t *testing.T, id core.SessionID) []string {
	t.Helper()
	out, _ := n.turns(t, id)
	return out
}

// turns returns the session's final outputs and how many turns completed,
// from the store.
func (n *node) turns(t *testing.T, id core.SessionID) (out []string, completed int) {
	t.Helper()
	for after := uint64(0); ; {
		evs, err := n.st.EventsSince(context.Background(), after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			after = e.Seq
			switch {
			case e.Session != id:
			case e.Kind == core.EventOutput && e.Final:
				out = append(out, e.Text)
			case e.Kind == core.EventTurnComplete:
				completed++
			}
		}
		if len(evs) < 1000 {
			return out, completed
		}
	}
}

// holder returns the instance holding name by the database's clock.
func (n *node) holder(t *testing.T, name string) core.InstanceID {
	t.Helper()
	infos, err := n.st.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range infos {
		if l.Name == name && l.Held {
			return l.Holder
		}
	}
	return ""
}

// explain logs what a failed cluster test needs to be understood: the
// leases as the database has them, the workers each instance has, the
// session's agent state and inbox, and who started processes.
func (n *node) explain(t *testing.T, id core.SessionID, nodes map[core.InstanceID]*node, who *instanceOf) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if infos, err := n.st.Leases(ctx); err != nil {
		t.Logf("leases: %v", err)
	} else {
		for _, l := range infos {
			t.Logf("lease %s: holder %q token %d expires %s held %v", l.Name, l.Holder, l.Token, l.Expires.Format(time.StampMilli), l.Held)
		}
	}
	for _, nd := range nodes {
		o := nd.run.o
		o.mu.Lock()
		ws := slices.Sorted(maps.Keys(o.workers))
		o.mu.Unlock()
		t.Logf("instance %s: cut off %v, workers %q", nd.id, nd.leases.cut.Load(), ws)
	}
	st, ok, err := n.run.o.loadState(ctx, string(id))
	t.Logf("agent state %+v (saved %v, err %v)", st, ok, err)
	msgs, err := n.st.Inbox(ctx, id, "", 100)
	for _, m := range msgs {
		t.Logf("inbox %s %s: %q", m.ID, m.Role, m.Content)
	}
	if err != nil {
		t.Logf("inbox: %v", err)
	}
	out, completed := n.turns(t, id)
	t.Logf("final outputs %q, %d turns completed; processes started by %q, handed %q",
		out, completed, who.started(), who.fc.sent(string(id)))
}

// eventually polls cond until it holds or 20 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
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

// Two instances on one PostgreSQL, one session: a message written through
// either reaches both orchestrators, and only the lease's holder runs an
// agent. The holder loses its database mid-turn (for its leases): it stops
// its agent, the other takes the session over when the lease expires, hands
// the unanswered message again and answers it once, and answers the next
// message once. Then the new holder stops cleanly and the first, back,
// takes the session and answers the third message once.
func TestSessionLeaseOnPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	fc := newFakeClaude(func(ft *fakeTurn) {
		ft.Say("thinking about " + ft.Text)
		ft.Pause(time.Hour)
	})
	who := &instanceOf{fc: fc}
	nodes := map[core.InstanceID]*node{}
	for _, id := range []core.InstanceID{"a", "b"} {
		nodes[id] = startNode(t, srv.URL, id, who.start(id))
	}
	a := nodes["a"]
	sid := a.handle(t, core.Command{Kind: core.CreateSession, Origin: platform, Actor: ann}).Session
	lease := leaseName(string(sid))
	// Cleanups run last in first: this one before the nodes stop.
	t.Cleanup(func() {
		if t.Failed() {
			a.explain(t, sid, nodes, who)
		}
	})
	a.handle(t, core.Command{Kind: core.SendMessage, Session: sid, Origin: platform, Actor: ann, Text: "question"})
	eventually(t, "an agent started", func() bool { return len(fc.sent(string(sid))) == 1 })
	holder := a.holder(t, lease)
	if holder == "" {
		t.Fatal("an agent runs and nobody holds the session's lease")
	}
	// The first turn was handed with the pausing model, which plays it
	// whenever the process gets to it: it stays unanswered.
	fc.mu.Lock()
	fc.model = func(ft *fakeTurn) { ft.Say("answer to " + ft.Text) }
	fc.mu.Unlock()
	// The other instance heard of the message too and waits for the lease.
	eventually(t, "the other instance waiting for the session", func() bool {
		o := nodes[other(holder)].run.o
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.workers[string(sid)] != nil
	})
	if got := who.started(); !slices.Equal(got, []core.InstanceID{holder}) {
		t.Fatalf("processes started by %q: want one, by the holder %q", got, holder)
	}

	nodes[holder].leases.cut.Store(true)
	cut := time.Now()
	first := fc.procsOf(string(sid))[0]
	eventually(t, "the holder stops its agent", first.wasStopped)
	stopped := time.Since(cut)
	eventually(t, "the other's agent", func() bool { return len(who.started()) == 2 })
	took := time.Since(cut)
	eventually(t, "the other answers the message", func() bool {
		return slices.Equal(a.finals(t, sid), []string{"answer to question"})
	})
	t.Logf("cut off from the database: the holder stopped its agent after %v, the other started one after %v (lease ttl %v, renewed every %v, margin %v)",
		stopped.Round(time.Millisecond), took.Round(time.Millisecond), testLease.TTL, testLease.Renew, testLease.Margin)
	if got := who.started(); !slices.Equal(got, []core.InstanceID{holder, other(holder)}) {
		t.Fatalf("processes started by %q", got)
	}
	if got := fc.sent(string(sid)); !slices.Equal(got, []string{"question", "question"}) {
		t.Fatalf("handed %q: the unanswered message again, once", got)
	}

	nodes[holder].handle(t, core.Command{Kind: core.SendMessage, Session: sid, Origin: platform, Actor: bob, Text: "next"})
	// Its turn completed: the watermark is saved before the yield.
	eventually(t, "the next message answered", func() bool { _, n := a.turns(t, sid); return n == 2 })

	// The first instance gets its database back; the second stops cleanly.
	nodes[holder].leases.cut.Store(false)
	nodes[other(holder)].stop()
	nodes[holder].handle(t, core.Command{Kind: core.SendMessage, Session: sid, Origin: platform, Actor: ann, Text: "third"})
	eventually(t, "the third message answered", func() bool { _, n := nodes[holder].turns(t, sid); return n == 3 })
	nodes[holder].run.stop() // nothing more is said after this
	if got := nodes[holder].finals(t, sid); !slices.Equal(got, []string{"answer to question", "answer to next", "answer to third"}) {
		t.Fatalf("final outputs %q", got)
	}
	if got := fc.sent(string(sid)); !slices.Equal(got, []string{"question", "question", "next", "third"}) {
		t.Fatalf("handed %q", got)
	}
	if got := who.started(); !slices.Equal(got, []core.InstanceID{holder, other(holder), holder}) {
		t.Fatalf("processes started by %q", got)
	}
}
