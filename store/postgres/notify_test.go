package postgres

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/follow"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// signalListener wraps a Listener and closes ready when it first listens.
type signalListener struct {
	follow.Listener
	once  sync.Once
	ready chan struct{}
}

func (l *signalListener) Listen(ctx context.Context, hint func(uint64)) error {
	return l.Listener.Listen(ctx, func(seq uint64) {
		if seq == 0 {
			l.once.Do(func() { close(l.ready) })
		}
		hint(seq)
	})
}

// instance is one parley process's share of the notifications: its store,
// its local bus (what its own commits publish), and its follower's cluster
// feed.
type instance struct {
	s       *Store
	local   *core.MemBus
	cluster *core.MemBus
	f       *follow.Follower
}

// startInstance opens a store on url and runs a follower of the log on it
// as the daemon would, with a poll so slow that only notifications (or the
// local bus) can bring events in time.
func startInstance(tb testing.TB, url string) *instance {
	tb.Helper()
	ctx := context.Background()
	s, err := Open(ctx, url, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	last, err := s.LastEventSeq(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	in := &instance{s: s, local: core.NewUnorderedMemBus(), cluster: core.NewMemBus(last + 1)}
	ln := &signalListener{Listener: s, ready: make(chan struct{})}
	in.f = follow.New(s, in.cluster, follow.Options{After: last, Local: in.local, Listener: ln, Poll: time.Hour})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- in.f.Run(rctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Run = %v", err)
		}
		_ = s.Close()
	})
	select {
	case <-ln.ready:
	case <-time.After(10 * time.Second):
		tb.Fatal("the follower does not listen")
	}
	return in
}

// appendHuman appends a person's message and publishes its events on the
// instance's local bus, as commands.Service does.
func (in *instance) appendHuman(ctx context.Context, session core.SessionID, key string) ([]core.Event, error) {
	res, err := in.s.Append(ctx, core.Append{
		Message:  core.Message{Session: session, Role: core.RoleUser, Actor: core.Actor{ID: "1", Name: "Ada"}, Origin: "telegram", Mime: core.MimeMarkdown, Content: "hello " + key},
		DedupKey: "telegram/" + key,
		Events:   []core.Event{{Kind: core.EventHumanMessage, Origin: "telegram", Message: &core.Message{}}},
	})
	if err != nil {
		return nil, err
	}
	for _, e := range res.Events {
		in.local.Publish(e)
	}
	return res.Events, nil
}

// Two instances on one database, each with its follower: events committed
// through either, by concurrent writers, reach both cluster feeds once each,
// in seq order, equal to what the committing instance's Append returned
// (so a reducer fed on either instance builds the same state), carried by
// notifications alone (the poll is an hour).
func TestNotifyAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := pgtest.Start(t)
	a, b := startInstance(t, srv.URL), startInstance(t, srv.URL)
	subA, cancelA := a.cluster.Subscribe(4096, false)
	defer cancelA()
	subB, cancelB := b.cluster.Subscribe(4096, false)
	defer cancelB()
	sess, created, err := a.s.CreateSession(ctx, core.Session{Title: "t"}, core.Event{Kind: core.EventSessionCreated})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range created {
		a.local.Publish(e)
	}
	const writers, each = 8, 50
	var mu sync.Mutex
	committed := map[uint64]core.Event{created[0].Seq: created[0]}
	var wg sync.WaitGroup
	for w := range writers {
		in := []*instance{a, b}[w%2]
		wg.Go(func() {
			for i := range each {
				evs, err := in.appendHuman(ctx, sess.ID, fmt.Sprint(w, "/", i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, e := range evs {
					committed[e.Seq] = e
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	total := 1 + writers*each
	for name, sub := range map[string]*core.Subscription{"A": subA, "B": subB} {
		for want := created[0].Seq; want < created[0].Seq+uint64(total); want++ {
			select {
			case e := <-sub.C:
				if e.Seq != want {
					t.Fatalf("instance %s: got seq %d, want %d", name, e.Seq, want)
				}
				if c := committed[e.Seq]; !reflect.DeepEqual(e, c) {
					t.Fatalf("instance %s: seq %d is\n%+v\nthe committer returned\n%+v", name, e.Seq, e, c)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("instance %s: no seq %d within 10 s", name, want)
			}
		}
		select {
		case e := <-sub.C:
			t.Errorf("instance %s: one more event, seq %d", name, e.Seq)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// A notification carries the last seq of its commit, arrives after the
// commit, and comes in commit order; writes that log no event notify
// nothing.
func TestListenHearsCommits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := pgtest.Start(t)
	a := openURL(t, srv.URL, storetest.Options{})
	b := openURL(t, srv.URL, storetest.Options{})
	hints := make(chan uint64, 100)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- b.Listen(lctx, func(seq uint64) { hints <- seq }) }()
	if seq := <-hints; seq != 0 {
		t.Fatalf("first hint %d, want 0 (listening)", seq)
	}
	sess, _, err := a.CreateSession(ctx, core.Session{Title: "t"}, core.Event{Kind: core.EventSessionCreated})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.SetCursor(ctx, "telegram/offset", "42"); err != nil {
		t.Fatal(err)
	}
	evs, err := a.AppendEvents(ctx, core.Event{Kind: core.EventOutput, Session: sess.ID, Text: "x"},
		core.Event{Kind: core.EventOutput, Session: sess.ID, Text: "xy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []uint64{1, evs[1].Seq} {
		select {
		case seq := <-hints:
			if seq != want {
				t.Fatalf("hint %d, want %d", seq, want)
			}
			if last, _ := b.LastEventSeq(ctx); last < seq {
				t.Fatalf("hint %d before its commit is visible (last %d)", seq, last)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no hint of seq %d", want)
		}
	}
	select {
	case seq := <-hints:
		t.Errorf("a hint more: %d", seq)
	case <-time.After(100 * time.Millisecond):
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Listen after its context ended = %v, want nil", err)
	}
}

// A listener whose connection the server ends returns the error, and a
// follower listens again and catches up with what was committed meanwhile.
func TestListenerConnectionLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := pgtest.Start(t)
	a, b := startInstance(t, srv.URL), startInstance(t, srv.URL)
	sub, cancel := b.cluster.Subscribe(64, false)
	defer cancel()
	sess, _, err := a.s.CreateSession(ctx, core.Session{Title: "t"}, core.Event{Kind: core.EventSessionCreated})
	if err != nil {
		t.Fatal(err)
	}
	if e := recvWithin(t, sub, 10*time.Second); e.Seq != 1 {
		t.Fatalf("got seq %d, want 1", e.Seq)
	}
	listeners := func() []int32 {
		t.Helper()
		var pids []int32
		err := a.s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity
			WHERE query = 'LISTEN `+NotifyChannel+`'`).Scan(&pids)
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	old := listeners()
	var n int
	err = a.s.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM unnest($1::int[]) pid`, old).Scan(&n)
	if err != nil || n != 2 {
		t.Fatalf("terminated %d of the listeners %v, %v; want 2", n, old, err)
	}
	if _, err := a.appendHuman(ctx, sess.ID, "during"); err != nil {
		t.Fatal(err)
	}
	if e := recvWithin(t, sub, 10*time.Second); e.Seq != 2 {
		t.Fatalf("got seq %d, want 2", e.Seq)
	}
	// Listening again: a later commit is heard, not polled (an hour).
	deadline := time.Now().Add(10 * time.Second)
	for {
		again := slices.DeleteFunc(listeners(), func(pid int32) bool { return slices.Contains(old, pid) })
		if len(again) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listening again: %v after 10 s, want 2 new connections", again)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
	}
	if _, err := a.appendHuman(ctx, sess.ID, "after"); err != nil {
		t.Fatal(err)
	}
	if e := recvWithin(t, sub, 10*time.Second); e.Seq != 3 {
		t.Fatalf("got seq %d, want 3", e.Seq)
	}
}

func recvWithin(t *testing.T, sub *core.Subscription, d time.Duration) core.Event {
	t.Helper()
	select {
	case e := <-sub.C:
		return e
	case <-time.After(d):
		t.Fatalf("no event within %v", d)
		return core.Event{}
	}
}
