package orchestrator

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	parleymcp "github.com/parley-chat/parley/mcp"
	"github.com/parley-chat/parley/mcp/agent"
)

// leaseTable is a store's lease table in memory, its clock the bubble's:
// what store/postgres does in SQL, so that two orchestrators can share a
// session's lease on a fake clock.
type leaseTable struct {
	mu   sync.Mutex
	rows map[string]*core.Lease
	// cut instances reach no store: their calls fail.
	cut map[core.InstanceID]bool
	// cursors is the store fenced cursors are written to, the one the
	// MCP server reads agent.state from.
	cursors interface {
		SetCursor(ctx context.Context, name, value string) error
	}
}

func newLeaseTable() *leaseTable {
	return &leaseTable{rows: map[string]*core.Lease{}, cut: map[core.InstanceID]bool{}}
}

// as is instance id's view of the table.
func (t *leaseTable) as(id core.InstanceID) core.Leaser { return tableView{t: t, id: id} }

// holder returns who holds name now, "" for nobody.
func (t *leaseTable) holder(name string) core.InstanceID {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.rows[name]; r != nil && time.Now().Before(r.Expires) {
		return r.Holder
	}
	return ""
}

func (t *leaseTable) cutOff(id core.InstanceID) {
	t.mu.Lock()
	t.cut[id] = true
	t.mu.Unlock()
}

type tableView struct {
	t  *leaseTable
	id core.InstanceID
}

var errUnreachable = errors.New("the store is unreachable")

func (v tableView) AcquireLease(ctx context.Context, name string, ttl time.Duration) (core.Lease, bool, error) {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	if v.t.cut[v.id] {
		return core.Lease{}, false, errUnreachable
	}
	now := time.Now()
	r := v.t.rows[name]
	if r == nil {
		r = &core.Lease{Name: name}
		v.t.rows[name] = r
	}
	if r.Holder != "" && r.Holder != v.id && now.Before(r.Expires) {
		return *r, false, nil
	}
	r.Holder, r.Token, r.Expires = v.id, r.Token+1, now.Add(ttl)
	return *r, true, nil
}

func (v tableView) RenewLease(ctx context.Context, l core.Lease, ttl time.Duration) (core.Lease, error) {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	if v.t.cut[v.id] {
		return core.Lease{}, errUnreachable
	}
	r, now := v.t.rows[l.Name], time.Now()
	if r == nil || r.Holder != v.id || r.Token != l.Token || !now.Before(r.Expires) {
		return core.Lease{}, core.ErrLeaseLost
	}
	r.Expires = now.Add(ttl)
	return *r, nil
}

func (v tableView) ReleaseLease(ctx context.Context, l core.Lease) error {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	if v.t.cut[v.id] {
		return errUnreachable
	}
	if r := v.t.rows[l.Name]; r != nil && r.Holder == v.id && r.Token == l.Token {
		r.Holder, r.Expires = "", time.Now()
	}
	return nil
}

func (v tableView) Leases(ctx context.Context) ([]core.LeaseInfo, error) {
	return nil, errors.New("not used by these tests")
}

// SetCursorFenced writes under the table's lock, so that the check and
// the write are one step, as the database's one statement.
func (v tableView) SetCursorFenced(ctx context.Context, name, value string, l core.Lease) error {
	v.t.mu.Lock()
	defer v.t.mu.Unlock()
	if v.t.cut[v.id] {
		return errUnreachable
	}
	if r := v.t.rows[l.Name]; r == nil || r.Holder != v.id || r.Token != l.Token || !time.Now().Before(r.Expires) {
		return core.ErrLeaseLost
	}
	return v.t.cursors.SetCursor(ctx, name, value)
}

// instanceOf records which instance started each process.
type instanceOf struct {
	mu  sync.Mutex
	fc  *fakeClaude
	ids []core.InstanceID
}

func (s *instanceOf) start(id core.InstanceID) agent.Driver {
	return namedDriver{Namer: s.fc, Driver: driverFunc(func(ctx context.Context, req agent.StartRequest) (agent.Conversation, error) {
		p, err := s.fc.Start(ctx, req)
		if err == nil {
			s.mu.Lock()
			s.ids = append(s.ids, id)
			s.mu.Unlock()
		}
		return p, err
	})}
}

func (s *instanceOf) started() []core.InstanceID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ids)
}

// two starts orchestrators of instances "a" and "b" on st, sharing tab.
func two(t *testing.T, st *stack, fc *fakeClaude, tab *leaseTable) (map[core.InstanceID]*running, *instanceOf) {
	t.Helper()
	who := &instanceOf{fc: fc}
	runs := map[core.InstanceID]*running{}
	for _, id := range []core.InstanceID{"a", "b"} {
		runs[id] = startOrchestrator(t, st, fc, func(o *Options) {
			o.Leases, o.Agents = tab.as(id), claudeAgent(who.start(id), true)
		})
	}
	return runs, who
}

func other(id core.InstanceID) core.InstanceID {
	if id == "a" {
		return "b"
	}
	return "a"
}

// at lets the bubble's time pass until t and everything settle.
func at(t time.Time) {
	time.Sleep(time.Until(t))
	synctest.Wait()
}

// Two instances hear of the same message: one runs the session's agent.
// Cut off from the store mid-turn, it stops its process on its own clock
// exactly TTL − margin (5 s) after its last good renewal, before the lease
// expires (6 s) and the other, which waited for it, takes it over then:
// the turn's message is handed again and answered once, and so is the
// next one, by the new holder alone.
func TestSessionLeaseFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("thinking about " + ft.Text)
			ft.Pause(time.Hour)
		})
		tab := newLeaseTable()
		tab.cursors = st.store
		_, who := two(t, st, fc, tab)
		st.say(id, ann, "question")
		t0 := time.Now()
		synctest.Wait()
		lease := leaseName(string(id))
		holder := tab.holder(lease)
		if holder == "" || !slices.Equal(who.started(), []core.InstanceID{holder}) {
			t.Fatalf("holder %q, processes started by %q: want one, by the holder", holder, who.started())
		}
		fc.mu.Lock()
		fc.model = func(ft *fakeTurn) { ft.Say("answer to " + ft.Text) }
		fc.mu.Unlock()

		// The grant at t0 was renewed at t0+2s; cut off at t0+3s, the
		// holder stops at t0+2s+5s and the row expires at t0+2s+6s.
		at(t0.Add(3 * time.Second))
		tab.cutOff(holder)
		first := fc.procsOf(string(id))[0]
		at(t0.Add(7*time.Second - time.Millisecond))
		if first.wasStopped() {
			t.Fatal("the holder stopped its agent before its own deadline")
		}
		at(t0.Add(7 * time.Second))
		if !first.wasStopped() {
			t.Fatal("the holder did not stop its agent at TTL - margin after its last renewal")
		}
		at(t0.Add(8*time.Second - time.Millisecond))
		if n := len(who.started()); n != 1 {
			t.Fatalf("%d processes before the lease expired", n)
		}
		// The waiter tries every core.LeaseRetry from when it began to
		// wait (a few milliseconds after t0, behind the holder's first
		// writes): it has the lease within one such interval of the expiry.
		at(t0.Add(8*time.Second + core.LeaseRetry))
		if got := who.started(); !slices.Equal(got, []core.InstanceID{holder, other(holder)}) {
			t.Fatalf("processes started by %q: the other takes over when the lease expires", got)
		}
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"question", "question"}) {
			t.Fatalf("handed %q: the unanswered turn again, once", got)
		}
		if _, finals := st.outputs(id); !slices.Equal(finals, []string{"answer to question"}) {
			t.Fatalf("final outputs %q", finals)
		}

		st.say(id, bob, "next")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"question", "question", "next"}) {
			t.Fatalf("handed %q", got)
		}
		if _, finals := st.outputs(id); !slices.Equal(finals, []string{"answer to question", "answer to next"}) {
			t.Fatalf("final outputs %q", finals)
		}
		if n := len(who.started()); n != 2 {
			t.Fatalf("%d processes started", n)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 2 {
			t.Fatalf("%d turns completed", n)
		}
	})
}

// A clean stop releases the lease: the waiting instance takes the session
// at its next attempt, finds nothing unanswered, and answers the next
// message once. An idle session's lease is released once its process
// stopped, so that no instance holds it.
func TestSessionLeaseCleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(nil)
		tab := newLeaseTable()
		tab.cursors = st.store
		runs, who := two(t, st, fc, tab)
		st.say(id, ann, "first")
		settle(time.Second)
		lease := leaseName(string(id))
		holder := tab.holder(lease)
		if holder == "" || !slices.Equal(who.started(), []core.InstanceID{holder}) {
			t.Fatalf("holder %q, processes started by %q", holder, who.started())
		}
		runs[holder].stop()
		if !fc.procsOf(string(id))[0].wasStopped() {
			t.Fatal("the stopped instance left its agent running")
		}
		// The waiter tries every 0.5 s, takes the lease, finds nothing
		// past the watermark and retires, releasing it.
		settle(core.LeaseRetry)
		if h := tab.holder(lease); h != "" {
			t.Fatalf("%q holds the lease of a session with nothing to do", h)
		}
		st.say(id, bob, "second")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"first", "second"}) {
			t.Fatalf("handed %q", got)
		}
		if got := who.started(); !slices.Equal(got, []core.InstanceID{holder, other(holder)}) {
			t.Fatalf("processes started by %q", got)
		}
		if _, finals := st.outputs(id); !slices.Equal(finals, []string{"echo: first", "echo: second"}) {
			t.Fatalf("final outputs %q", finals)
		}
		if h := tab.holder(lease); h != other(holder) {
			t.Fatalf("lease held by %q while its agent runs", h)
		}
		settle(DefaultIdleStop)
		if h := tab.holder(lease); h != "" {
			t.Fatalf("%q holds the lease of an idle session", h)
		}
	})
}

// An instance that starts while another runs a session's turn finds the
// session working, and waits for its lease. By the time it gets it (the
// holder yielded, idled, and stopped its process), that status is stale:
// it does not complete the turn again, so people are notified once.
func TestSessionLeaseNoStaleRepair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Say("working on " + ft.Text)
			ft.Pause(10 * time.Second)
			ft.Say("done")
		})
		tab := newLeaseTable()
		tab.cursors = st.store
		startOrchestrator(t, st, fc, func(o *Options) { o.Leases = tab.as("a") })
		st.say(id, ann, "question")
		settle(time.Second)
		if s := st.session(id).Status; s != core.StatusWorking {
			t.Fatalf("status %s mid-turn", s)
		}
		startOrchestrator(t, st, fc, func(o *Options) { o.Leases = tab.as("b") })
		settle(DefaultIdleStop + time.Minute)
		if h := tab.holder(leaseName(string(id))); h != "" {
			t.Fatalf("%q holds the lease of an idle session", h)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
			t.Fatalf("%d turns completed, want the one that ran", n)
		}
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"question"}) {
			t.Fatalf("handed %q", got)
		}
	})
}

// The holder answers the turn and is cut off from the store with its
// process idle. The other instance, which heard of the message too and
// waited, takes the lease when it expires, finds nothing past the
// watermark the holder saved, starts no process and frees the lease; the
// next message wakes it again and it answers that once. (The cluster test
// on PostgreSQL once saw the first turn answered before the cut: then no
// second process is right, not a session left behind.)
func TestSessionLeaseFailoverAfterAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(nil)
		tab := newLeaseTable()
		tab.cursors = st.store
		_, who := two(t, st, fc, tab)
		st.say(id, ann, "question")
		t0 := time.Now()
		synctest.Wait()
		lease := leaseName(string(id))
		holder := tab.holder(lease)
		if holder == "" || !slices.Equal(who.started(), []core.InstanceID{holder}) {
			t.Fatalf("holder %q, processes started by %q: want one, by the holder", holder, who.started())
		}
		if _, finals := st.outputs(id); !slices.Equal(finals, []string{"echo: question"}) {
			t.Fatalf("final outputs %q before the cut", finals)
		}

		// Renewed at t0+2s, cut off at t0+3s: the holder stops at
		// t0+7s, the row expires at t0+8s.
		row := func() core.Lease {
			tab.mu.Lock()
			defer tab.mu.Unlock()
			return *tab.rows[lease]
		}
		at(t0.Add(3 * time.Second))
		tab.cutOff(holder)
		held := row()
		at(t0.Add(7 * time.Second))
		if !fc.procsOf(string(id))[0].wasStopped() {
			t.Fatal("the holder did not stop its agent at TTL - margin after its last renewal")
		}
		at(t0.Add(8*time.Second - time.Millisecond))
		if h := tab.holder(lease); h != holder {
			t.Fatalf("lease held by %q before it expired", h)
		}
		// The waiter tries every core.LeaseRetry from when it began to
		// wait: it has the lease within one such interval of the expiry.
		at(t0.Add(8*time.Second + core.LeaseRetry))
		if r := row(); r.Token != held.Token+1 || r.Holder != "" {
			t.Fatalf("lease row %+v after %+v: the other took it once and freed it, with nothing to do", r, held)
		}
		if got := who.started(); !slices.Equal(got, []core.InstanceID{holder}) {
			t.Fatalf("processes started by %q: the answered turn needs none", got)
		}

		st.say(id, bob, "next")
		settle(time.Second)
		if got := who.started(); !slices.Equal(got, []core.InstanceID{holder, other(holder)}) {
			t.Fatalf("processes started by %q: the other runs the next turn", got)
		}
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"question", "next"}) {
			t.Fatalf("handed %q: each message once", got)
		}
		if _, finals := st.outputs(id); !slices.Equal(finals, []string{"echo: question", "echo: next"}) {
			t.Fatalf("final outputs %q", finals)
		}
		if n := len(st.events(id, core.EventTurnComplete)); n != 2 {
			t.Fatalf("%d turns completed", n)
		}
	})
}

// cursorMap is a store of cursors for tests that need no more.
type cursorMap struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *cursorMap) SetCursor(_ context.Context, name, value string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = value
	return nil
}

func (c *cursorMap) get(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

// A worker's state is saved fenced by its holding: once another instance
// took the session, the old holder's save changes nothing, says the lease
// was lost, and ends the worker's acting context, so that it cannot set
// the watermark back behind the new holder's.
func TestStateSaveFencedByTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tab := newLeaseTable()
		cursors := &cursorMap{m: map[string]string{}}
		tab.cursors = cursors
		name := leaseName("S1")
		h, err := core.Hold(t.Context(), tab.as("a"), name, core.HoldOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w := &worker{o: &Orchestrator{opts: Options{Leases: tab.as("a")}}, id: "S1", held: h}
		cursor := parleymcp.AgentStateCursor("S1", stateKey)
		if err := w.saveState(t.Context(), state{Watermark: "m2"}); err != nil {
			t.Fatalf("save while holding: %v", err)
		}
		if got := cursors.get(cursor); !strings.Contains(got, `"watermark":"m2"`) {
			t.Fatalf("state after the save: %q", got)
		}

		// Instance b takes the session over (a's holding expired while
		// a was stalled), and saves its own progress.
		tab.mu.Lock()
		tab.rows[name] = &core.Lease{Name: name, Holder: "b", Token: h.Lease().Token + 1, Expires: time.Now().Add(time.Hour)}
		tab.mu.Unlock()
		_ = cursors.SetCursor(t.Context(), cursor, `{"watermark":"m5"}`)

		err = w.saveState(t.Context(), state{Watermark: "m3"})
		if !errors.Is(err, core.ErrLeaseLost) {
			t.Fatalf("save after the takeover: %v, want core.ErrLeaseLost", err)
		}
		if got := cursors.get(cursor); got != `{"watermark":"m5"}` {
			t.Errorf("the old holder's save changed the state to %q", got)
		}
		select {
		case <-h.Context().Done():
		default:
			t.Fatal("the worker's acting context did not end")
		}
		if cause := context.Cause(h.Context()); !errors.Is(cause, core.ErrLeaseLost) {
			t.Errorf("the acting context ended with %v, want core.ErrLeaseLost", cause)
		}
	})
}
