package bolt

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/follow"
)

// On bbolt the daemon runs the same follower as on PostgreSQL: the local
// bus brings every event, each the next one, so the cluster feed gets them
// all in order without reading the log beyond the start; Listen only
// says it listens and returns when its context ends.
func TestFollowerOnOneInstance(t *testing.T) {
	ctx := t.Context()
	s, _ := openTemp(t, Options{NoSync: true})
	last, err := s.LastEventSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	local, cluster := core.NewMemBus(last+1), core.NewMemBus(last+1)
	sub, cancelSub := cluster.Subscribe(64, false)
	defer cancelSub()
	listened := make(chan struct{})
	log := &countingLog{Store: s}
	f := follow.New(log, cluster, follow.Options{After: last, Local: local, Poll: time.Hour,
		Listener: listenerFunc(func(ctx context.Context, hint func(uint64)) error {
			return s.Listen(ctx, func(seq uint64) {
				if seq == 0 {
					close(listened)
				}
				hint(seq)
			})
		})})
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx) }()
	<-listened
	var want []core.Event
	for range 5 {
		_, evs, err := s.CreateSession(ctx, core.Session{Title: "s"}, core.Event{Kind: core.EventSessionCreated})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			local.Publish(e)
		}
		want = append(want, evs...)
	}
	if len(want) != 5 {
		t.Fatalf("%d events logged, want 5", len(want))
	}
	var got []core.Event
	for len(got) < len(want) {
		select {
		case e := <-sub.C:
			got = append(got, e)
		case <-time.After(5 * time.Second):
			t.Fatalf("cluster feed has %d of %d events", len(got), len(want))
		}
	}
	if !slices.EqualFunc(got, want, func(a, b core.Event) bool { return a.Seq == b.Seq && a.Kind == b.Kind }) {
		t.Errorf("cluster feed %+v, want %+v", got, want)
	}
	if n := log.reads.Load(); n > 2 {
		t.Errorf("%d reads of the log, want those at start only: the first and the listener's", n)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
}

// countingLog counts the follower's reads.
type countingLog struct {
	*Store
	reads atomic.Int64
}

func (l *countingLog) EventsSince(ctx context.Context, after uint64, limit int) ([]core.Event, error) {
	l.reads.Add(1)
	return l.Store.EventsSince(ctx, after, limit)
}

type listenerFunc func(ctx context.Context, hint func(uint64)) error

func (l listenerFunc) Listen(ctx context.Context, hint func(uint64)) error { return l(ctx, hint) }

// On bbolt the presence of all instances is this one's: announcing goes
// nowhere, listening hears nothing and ends with its context.
func TestPresenceOnOneInstance(t *testing.T) {
	s, _ := openTemp(t, Options{NoSync: true})
	local := staticPresence{Ready: true, All: 1, Sessions: map[core.SessionID]int{"s1": 2}}
	p := follow.NewPresence(local, s, follow.PresenceOptions{Instance: "only"})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	if err := s.Announce(ctx, follow.Announcement{Instance: "other", Status: core.AgentStatus{Ready: true, All: 5}}); err != nil {
		t.Fatalf("Announce = %v", err)
	}
	if got := p.AgentStatus(); got.All != 1 || got.Sessions["s1"] != 2 || len(got.Sessions) != 1 || !got.Ready {
		t.Errorf("status %+v, want this instance's", got)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	ready := false
	if err := s.ListenPresence(ctx, func() { ready = true }, func(follow.Announcement) { t.Error("heard something") }); err != nil || !ready {
		t.Errorf("ListenPresence after its context ended = %v, ready %v; want nil, ready", err, ready)
	}
}

type staticPresence core.AgentStatus

func (p staticPresence) AgentStatus() core.AgentStatus    { return core.AgentStatus(p) }
func (p staticPresence) PresenceChanged() <-chan struct{} { return nil }
