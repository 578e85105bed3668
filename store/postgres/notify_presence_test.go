package postgres

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/follow"
	"github.com/parley-chat/parley/store/postgres/pgtest"
	"github.com/parley-chat/parley/store/storetest"
)

// An announcement reaches the other instance whole, a status of many
// sessions too (in parts, put together again), and a stop as such.
func TestPresenceAnnouncements(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := pgtest.Start(t)
	a := openURL(t, srv.URL, storetest.Options{})
	b := openURL(t, srv.URL, storetest.Options{})
	heard := make(chan follow.Announcement, 10)
	ready := make(chan struct{})
	lctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- b.ListenPresence(lctx, func() { close(ready) }, func(an follow.Announcement) { heard <- an })
	}()
	<-ready
	many := map[core.SessionID]int{}
	for i := range 2000 {
		many[core.NewSessionID(time.Unix(int64(i), 0))] = i%3 + 1
	}
	if parts := splitAnnouncement(follow.Announcement{Status: core.AgentStatus{Sessions: many}}, 1); len(parts) < 5 {
		t.Fatalf("%d parts for 2000 sessions: the test does not cross the payload limit", len(parts))
	}
	for _, want := range []follow.Announcement{
		{Instance: "a", Status: core.AgentStatus{Ready: true, All: 1, Sessions: map[core.SessionID]int{"s1": 2}}},
		{Instance: "a", Status: core.AgentStatus{Ready: true, All: 0, Sessions: many}},
		{Instance: "a", Gone: true, Status: core.AgentStatus{Sessions: map[core.SessionID]int{}}},
	} {
		if err := a.Announce(ctx, want); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-heard:
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("heard %s, want %s", brief(got), brief(want))
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("did not hear %s", brief(want))
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("ListenPresence = %v", err)
	}
}

func brief(a follow.Announcement) string {
	return fmt.Sprintf("{%s gone=%v ready=%v all=%d sessions=%d}", a.Instance, a.Gone, a.Status.Ready, a.Status.All, len(a.Status.Sessions))
}

// staticPresence is an MCP server's presence that does not change.
type staticPresence core.AgentStatus

func (p staticPresence) AgentStatus() core.AgentStatus {
	return core.AgentStatus{Ready: p.Ready, All: p.All, Sessions: maps.Clone(p.Sessions)}
}
func (p staticPresence) PresenceChanged() <-chan struct{} { return nil }

// Two instances on one database, each with its own agents, tell the same
// presence: the sum of both.
func TestPresenceAcrossInstances(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	srv := pgtest.Start(t)
	locals := []staticPresence{
		{Ready: true, Sessions: map[core.SessionID]int{"s1": 1}},
		{Ready: true, All: 1, Sessions: map[core.SessionID]int{"s2": 1}},
	}
	var ps []*follow.Presence
	var wg sync.WaitGroup
	rctx, stop := context.WithCancel(ctx)
	defer func() { stop(); wg.Wait() }()
	for i, l := range locals {
		s := openURL(t, srv.URL, storetest.Options{})
		p := follow.NewPresence(l, s, follow.PresenceOptions{Instance: fmt.Sprint("instance-", i)})
		ps = append(ps, p)
		wg.Go(func() { _ = p.Run(rctx) })
	}
	want := core.AgentStatus{Ready: true, All: 1, Sessions: map[core.SessionID]int{"s1": 1, "s2": 1}}
	deadline := time.Now().Add(10 * time.Second)
	for i, p := range ps {
		for !reflect.DeepEqual(p.AgentStatus(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("instance %d: %+v, want %+v", i, p.AgentStatus(), want)
			}
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
		}
	}
}
