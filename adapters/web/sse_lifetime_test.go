package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
)

// TestSSEReconnectsLoseNothing: streams that end by their lifetime (100 ms
// here) and are reconnected as EventSource does bring a client that reads
// every event once, in order, with ?ui=delta and without: the events sent
// while a stream was open, and those logged while the client was between
// two streams, which the next one replays after Last-Event-ID. Each stream
// says "retry: 1000" and ends with a "reconnect" message carrying the id
// to resume from, in good order. A stream resumed with nothing new sends
// neither an event nor a state: "agents" and its "reconnect", nothing else.
// Without ?ui=delta, the whole state of the last events goes out before
// the stream ends, though its 200 ms had not passed.
func TestSSEReconnectsLoseNothing(t *testing.T) {
	for _, query := range []string{"?ui=delta", ""} {
		t.Run("query="+query, func(t *testing.T) {
			s := newStack(t, func(o *stackOptions) { o.web.StreamLifetime = 100 * time.Millisecond })
			id := s.newSession("reconnects")
			s.snapshot(id) // its events carry deltas
			start, err := s.store.LastEventSeq(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			posted := 0
			post := func(n int) {
				for range n {
					s.chat(id, fmt.Sprintf("message %d", posted))
					posted++
				}
			}
			ends := func(l streamLog) {
				t.Helper()
				if l.status != 200 || l.err != nil || l.retry != "1000" {
					t.Fatalf("stream: status %d, retry %q, ended with %v", l.status, l.retry, l.err)
				}
				if len(l.frames) == 0 || l.frames[len(l.frames)-1].Event != "reconnect" {
					t.Fatalf("the stream did not end with a reconnect message: %q", l.kinds())
				}
				last := l.frames[len(l.frames)-1]
				var m struct {
					Kind   string `json:"kind"`
					Resume uint64 `json:"resume"`
					Reason string `json:"reason"`
				}
				if err := json.Unmarshal([]byte(last.Data), &m); err != nil || m.Kind != "reconnect" ||
					strconv.FormatUint(m.Resume, 10) != last.ID || !strings.Contains(m.Reason, "lifetime") {
					t.Fatalf("reconnect message id %s %s (%v)", last.ID, last.Data, err)
				}
				if l.lastID != last.ID {
					t.Fatalf("Last-Event-ID %q after a reconnect message of id %s", l.lastID, last.ID)
				}
			}
			newest := func() string {
				n, _ := s.store.LastEventSeq(context.Background())
				return strconv.FormatUint(n, 10)
			}
			c := s.es(query)

			// Events while a stream is open (should its lifetime end
			// meanwhile, the next stream carries the rest).
			waitClients(t, s, 1, wait)
			post(5)
			ends(c.next())
			// Events while the client is between streams.
			post(5)
			c.again()
			l := c.next()
			ends(l)
			if n := slices.Index(l.kinds(), string(core.EventHumanMessage)); n < 0 {
				t.Fatalf("the resumed stream replayed no message: %q", l.kinds())
			}
			if query == "" {
				// The state of the last events, sent before the end.
				var st struct {
					Type string `json:"type"`
					Seq  uint64 `json:"seq"`
				}
				for _, f := range l.frames {
					if f.Event == uistate.UIUpdateType {
						if err := json.Unmarshal([]byte(f.Data), &st); err != nil {
							t.Fatal(err)
						}
					}
				}
				if st.Type != uistate.UIUpdateType || strconv.FormatUint(st.Seq, 10) != newest() {
					t.Fatalf("no state of the last event (%s) before the stream ended: %q", newest(), l.kinds())
				}
			}
			// Nothing new: nothing sent again.
			c.again()
			l = c.next()
			ends(l)
			if !slices.Equal(l.kinds(), []string{"agents", "reconnect"}) {
				t.Fatalf("a stream resumed with nothing new sent %q", l.kinds())
			}
			if l.lastID != newest() {
				t.Fatalf("resumes after %s, the newest event is %s", l.lastID, newest())
			}
			// And again: during a stream, and between two.
			c.again()
			waitClients(t, s, 1, wait)
			post(3)
			ends(c.next())
			post(3)
			c.again()
			ends(c.next())

			want, err := s.store.EventsSince(context.Background(), start, 0)
			if err != nil {
				t.Fatal(err)
			}
			for i, e := range want {
				select {
				case f := <-c.events:
					if f.ID != strconv.FormatUint(e.Seq, 10) || f.Event != string(e.Kind) {
						t.Fatalf("event %d: got %s %s, want %d %s", i, f.ID, f.Event, e.Seq, e.Kind)
					}
				default:
					t.Fatalf("%d events of %d received; the next is %d %s", i, len(want), e.Seq, e.Kind)
				}
			}
			select {
			case f := <-c.events:
				t.Fatalf("an event more: %s %s", f.ID, f.Event)
			default:
			}
			if posted != 16 {
				t.Fatal(posted)
			}
		})
	}
}

// TestSSEOldestEndsToMakeRoom: at Options.MaxStreams open streams (3
// here, the lifetime too long to matter), a new one ends the oldest, which
// says so ("reconnect", in good order) and resumes when it reconnects,
// ending the next oldest in turn; never more than 3 are open.
func TestSSEOldestEndsToMakeRoom(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.MaxStreams = 3 })
	id := s.newSession("crowded")
	var cs []*esClient
	for i := range 3 {
		cs = append(cs, s.es(""))
		waitClients(t, s, i+1, wait)
	}
	s.chat(id, "seen by all")
	for _, c := range cs {
		c.await(core.EventHumanMessage)
	}
	select {
	case l := <-cs[0].ended:
		t.Fatalf("a stream ended before the bound was reached: %q", l.kinds())
	default:
	}

	cs = append(cs, s.es(""))
	l := cs[0].next()
	if l.err != nil || len(l.frames) == 0 || l.frames[len(l.frames)-1].Event != "reconnect" ||
		!strings.Contains(l.frames[len(l.frames)-1].Data, "too many streams") {
		t.Fatalf("the oldest stream ended with %v: %q", l.err, l.kinds())
	}
	for _, c := range cs[1:] {
		select {
		case l := <-c.ended:
			t.Fatalf("a stream other than the oldest ended: %q", l.kinds())
		default:
		}
	}
	waitClients(t, s, 3, wait)

	// It reconnects, and the oldest then is the second.
	s.chat(id, "while the first was away")
	cs[0].again()
	cs[0].await(core.EventHumanMessage)
	if l := cs[1].next(); l.frames[len(l.frames)-1].Event != "reconnect" {
		t.Fatalf("the second stream ended with %q", l.kinds())
	}
	waitClients(t, s, 3, wait)
	if n := s.web.SSEClients(); n != 3 {
		t.Fatalf("%d streams open, at most 3 allowed", n)
	}
}

// TestSSEResumeAheadOfTheLog: a Last-Event-ID past the newest event (the
// data was restored from a backup) gets a "resync" to the newest, rather
// than a stream that takes the events up to that id for ones the client
// has.
func TestSSEResumeAheadOfTheLog(t *testing.T) {
	s := newStack(t)
	id := s.newSession("restored")
	last, _ := s.store.LastEventSeq(context.Background())
	c := s.sse("", strconv.FormatUint(last+100, 10))
	f := c.next(wait)
	if f.Event != "resync" || f.ID != strconv.FormatUint(last, 10) {
		t.Fatalf("first message %+v, want a resync to %d", f, last)
	}
	s.chat(id, "after the restore")
	if m := c.next(wait).msg(t); m.Seq != last+1 {
		t.Fatalf("the next event has seq %d, want %d", m.Seq, last+1)
	}
}
