package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
)

// listening is a core.Presence whose agents listen to every session.
type listening struct{}

func (listening) AgentStatus() core.AgentStatus {
	return core.AgentStatus{Ready: true, All: 1, Sessions: map[core.SessionID]int{}}
}
func (listening) PresenceChanged() <-chan struct{} { return make(chan struct{}) }

// clusterServer is a second Server on st's store and handler, as an
// instance sharing a store runs it: notified from feed (every instance's
// events), deciding the no-agent notice from local (its own).
func clusterServer(t *testing.T, st *stack, feed, local core.Bus) (*Server, string) {
	t.Helper()
	srv, err := New(Options{Handler: st.svc, Store: st.store, Bus: feed, Local: local, Logger: testLogger(),
		NoAgentNotice: DefaultNoAgentNotice})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		cancel()
		<-done
		srv.Close()
		hs.CloseClientConnections()
		hs.Close()
	})
	return srv, hs.URL + "/mcp"
}

// noNotice fails if a notice comes on sub within quiet.
func noNotice(t *testing.T, sub *core.Subscription) {
	t.Helper()
	deadline := time.After(quiet)
	for {
		select {
		case e := <-sub.C:
			if e.Kind == core.EventNotice {
				t.Fatalf("unexpected notice %+v", e)
			}
		case <-deadline:
			return
		}
	}
}

// Among instances sharing a store, the no-agent notice is decided only
// for a message this instance committed (its local bus), not for one it
// hears of from another instance through the cluster feed, and by the
// presence of every instance.
func TestNoAgentNoticeLocalOnly(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	feed, local := core.NewUnorderedMemBus(), core.NewUnorderedMemBus()
	srv, _ := clusterServer(t, st, feed, local)
	id := st.createSession("a")
	written, cancel := st.bus.Subscribe(256, false)
	defer cancel()
	human := func(text string) core.Event {
		t.Helper()
		if _, err := st.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id, Origin: "telegram", Text: text}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case e := <-written.C:
				if e.Kind == core.EventHumanMessage {
					return e
				}
			case <-time.After(waitFor):
				t.Fatal("no human message event")
			}
		}
	}

	// Another instance's message: told to the subscribers, no notice.
	feed.Publish(human("from another instance"))
	noNotice(t, written)

	// This instance's own: it reaches the feed too, and one notice goes.
	e := human("from here")
	local.Publish(e)
	feed.Publish(e)
	if n := nextNotice(t, written); n.Session != id || n.Origin != "telegram" || n.Message.Content != DefaultNoAgentNotice {
		t.Fatalf("notice %+v", n)
	}
	noNotice(t, written)

	// An agent listening at another instance: no notice.
	srv.SetNoticePresence(listening{})
	e = human("heard elsewhere")
	local.Publish(e)
	feed.Publish(e)
	noNotice(t, written)
}

// An EventResync on the feed (the follower fell behind the event log)
// tells every subscriber to re-read what it subscribed to.
func TestResyncTellsSubscribers(t *testing.T) {
	st := newStack(t, t.TempDir(), stackOptions{})
	feed := core.NewUnorderedMemBus()
	_, url := clusterServer(t, st, feed, core.NewUnorderedMemBus())
	id := st.createSession("a")
	all := mustDial(t, url, connOptions{})
	all.subscribe(t, InboxURI)
	one := mustDial(t, url, connOptions{modern: true})
	one.subscribe(t, SessionInboxURI(id))

	feed.Publish(core.Event{Seq: 1000, Kind: core.EventResync, Time: time.Now()})
	if u := all.next(t); u.URI != InboxURI || len(u.Messages) != 0 {
		t.Errorf("after a resync the all-sessions subscriber got %+v, want a bare {uri}", u)
	}
	if u := one.next(t); u.URI != SessionInboxURI(id) || len(u.Messages) != 0 {
		t.Errorf("after a resync the session's subscriber got %+v, want a bare {uri}", u)
	}
	all.none(t)
}
