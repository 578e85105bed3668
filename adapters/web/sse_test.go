package web_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/store/bolt"
)

const wait = 10 * time.Second

// expectLog checks that c sends exactly the stored events after `after`, in
// order, and returns the last seq.
func expectLog(t *testing.T, s *stack, c *sseClient, after uint64) uint64 {
	t.Helper()
	want, err := s.store.EventsSince(context.Background(), after, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatal("no events to expect")
	}
	for _, e := range want {
		f := c.next(wait)
		m := f.msg(t)
		if f.ID != strconv.FormatUint(e.Seq, 10) || f.Event != string(e.Kind) || m.Seq != e.Seq ||
			m.Kind != e.Kind || m.Session != e.Session || m.Event.Seq != e.Seq {
			t.Fatalf("got id %s %s (seq %d), want %d %s", f.ID, f.Event, m.Seq, e.Seq, e.Kind)
		}
	}
	return want[len(want)-1].Seq
}

func TestSSEResumeAfterDisconnect(t *testing.T) {
	s := newStack(t)
	id := s.newSession("resume")
	c := s.sse("", "")
	s.chat(id, "before the disconnect")
	var last string
	for {
		f := c.next(wait)
		if f.Event == string(core.EventHumanMessage) {
			last = f.ID
			break
		}
	}
	c.close()
	for i := range 100 {
		s.chat(id, fmt.Sprintf("missed %d", i))
	}
	after, _ := strconv.ParseUint(last, 10, 64)

	c = s.sse("", last)
	end := expectLog(t, s, c, after)
	if !c.quiet(100 * time.Millisecond) {
		t.Fatal("duplicates after the replay")
	}
	// Then live events, without a gap.
	s.chat(id, "live")
	if f := c.next(wait); f.ID != strconv.FormatUint(end+1, 10) {
		t.Fatalf("first live event has id %s, want %d", f.ID, end+1)
	}
}

func TestSSEResumeByQueryAndFilter(t *testing.T) {
	s := newStack(t)
	a, b := s.newSession("a"), s.newSession("b")
	for i := range 5 {
		s.chat(a, fmt.Sprintf("a%d", i))
		s.chat(b, fmt.Sprintf("b%d", i))
	}
	c := s.sse("?last_event_id=0&session="+string(b), "")
	n := 0
	for {
		m := c.next(wait).msg(t)
		if m.Session != b {
			t.Fatalf("event of session %s on a stream of %s", m.Session, b)
		}
		if m.Kind == core.EventHumanMessage {
			if n++; n == 5 {
				break
			}
		}
	}
}

func TestSSEResyncWhenLogTruncated(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.store = bolt.Options{NoSync: true, MaxEvents: 20} })
	id := s.newSession("resync")
	for i := range 60 {
		s.chat(id, fmt.Sprintf("m%d", i))
	}
	c := s.sse("", "1")
	f := c.next(wait)
	if f.Event != "resync" || !strings.Contains(f.Data, `"kind":"resync"`) {
		t.Fatalf("first message %+v, want a resync", f)
	}
	resume, err := strconv.ParseUint(f.ID, 10, 64)
	if err != nil || resume <= 1 {
		t.Fatalf("resync id %q", f.ID)
	}
	end := expectLog(t, s, c, resume)
	last, _ := s.store.LastEventSeq(context.Background())
	if end != last {
		t.Fatalf("stream ended at %d, log at %d", end, last)
	}
	// The oldest kept event follows the resync directly.
	if _, err := s.store.EventsSince(context.Background(), resume-1, 1); err == nil {
		t.Fatalf("resync resumed after %d, but the log still had %d", resume, resume)
	}
}

func TestSSEHeartbeat(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.Heartbeat = 20 * time.Millisecond })
	c := s.sse("", "")
	select {
	case <-c.pings:
	case <-time.After(wait):
		t.Fatal("no heartbeat")
	}
	if n := s.web.SSEClients(); n != 1 {
		t.Fatalf("SSEClients = %d, want 1", n)
	}
}

// With a one-event buffer the live feed drops events all the time; the
// stream fills every gap from the store, and sends each event once.
func TestSSENoGapsWhileDropping(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.SSEBuffer = 1 })
	ids := []core.SessionID{s.newSession("x"), s.newSession("y"), s.newSession("z")}
	start, _ := s.store.LastEventSeq(context.Background())
	c := s.sse("", "")
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				if _, err := s.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id,
					Origin: core.OriginAPI, Text: fmt.Sprintf("n%d", i)}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	last, _ := s.store.LastEventSeq(context.Background())
	for seq := start + 1; seq <= last; seq++ {
		if f := c.next(wait); f.ID != strconv.FormatUint(seq, 10) {
			t.Fatalf("got event %s, want %d", f.ID, seq)
		}
	}
	if !c.quiet(100 * time.Millisecond) {
		t.Fatal("duplicates")
	}
}

// A client that never reads holds up neither the posts nor other clients,
// and is disconnected once a write to it times out.
func TestSSESlowClientDoesNotBlock(t *testing.T) {
	s := newStack(t, func(o *stackOptions) {
		o.web.WriteTimeout = 300 * time.Millisecond
		o.web.SSEBuffer = 16
	})
	id := s.newSession("slow")
	start, _ := s.store.LastEventSeq(context.Background())

	conn, err := net.Dial("tcp", s.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(conn, "GET /api/events HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", s.srv.Listener.Addr())
	reader := s.sse("", "")
	for s.web.SSEClients() < 2 {
		select {
		case <-time.After(wait):
			t.Fatal("the slow client never connected")
		case <-time.After(time.Millisecond):
		}
	}

	text := strings.Repeat("slow readers must not matter. ", 70)
	done := make(chan error, 1)
	began := time.Now()
	go func() {
		for i := range 1000 {
			_, err := s.svc.Handle(context.Background(), core.Command{Kind: core.SendMessage, Session: id,
				Origin: core.OriginAPI, Text: fmt.Sprintf("%d %s", i, text)})
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("posting 1000 messages did not finish: a slow SSE client holds up the daemon")
	}
	t.Logf("1000 posts in %s with a stuck SSE client", time.Since(began))

	last, _ := s.store.LastEventSeq(context.Background())
	for seq := start + 1; seq <= last; seq++ {
		if f := reader.next(wait); f.ID != strconv.FormatUint(seq, 10) {
			t.Fatalf("reading client got %s, want %d", f.ID, seq)
		}
	}
	deadline := time.After(wait)
	for s.web.SSEClients() != 1 {
		select {
		case <-deadline:
			t.Fatalf("the stuck client was not disconnected: %d clients", s.web.SSEClients())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func TestSSEEndsWhenAdapterStops(t *testing.T) {
	s := newStack(t)
	c := s.sse("", "")
	s.web.Close()
	select {
	case <-c.done:
	case <-time.After(wait):
		t.Fatal("the stream did not end")
	}
	if status, _ := s.get("/api/sessions"); status != http.StatusServiceUnavailable {
		t.Fatalf("after Close: %d, want 503", status)
	}
}
