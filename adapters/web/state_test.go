package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/parley-chat/parley/adapters/web"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/uistate"
	"github.com/parley-chat/parley/store/bolt"
)

// tool publishes agent tool activity the way a logged event reaches the bus.
func (s *stack) tool(id core.SessionID, callID, name, status string) {
	s.t.Helper()
	evs, err := s.store.AppendEvents(context.Background(), core.Event{Kind: core.EventToolActivity, Session: id,
		Origin: core.OriginMCP, Tool: &core.ToolActivity{ID: callID, Name: name, Status: status}})
	if err != nil {
		s.t.Fatal(err)
	}
	for _, e := range evs {
		s.bus.Publish(e)
	}
}

// conversation drives one session through every kind of timeline item.
func (s *stack) conversation(id core.SessionID, round int) {
	s.t.Helper()
	path := "/api/sessions/" + string(id)
	must[postedJSON](s.t, http.StatusOK)(s.post(path+"/messages", fmt.Sprintf(`{"text":"question %d"}`, round)))
	s.tool(id, fmt.Sprint("t", round, "a"), "grep", "running")
	s.tool(id, fmt.Sprint("t", round, "b"), "read_file", "running")
	s.tool(id, fmt.Sprint("t", round, "a"), "", "ok")
	s.handle(core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: "Working"})
	s.handle(core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: "Working on it"})
	s.chat(id, "an API message while busy")
	s.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: fmt.Sprint("q", round),
		Text: "Which one?", Options: []string{"left", "right"}})
	must[postedJSON](s.t, http.StatusOK)(s.post(path+"/answer", fmt.Sprintf(`{"question_id":"q%d","option":2}`, round)))
	s.tool(id, fmt.Sprint("t", round, "b"), "", "error")
	s.handle(core.Command{Kind: core.Notice, Session: id, Origin: "web", Text: "📎 Received file"})
	s.handle(core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: "Here is **the** answer."})
	s.handle(core.Command{Kind: core.OutputUpdate, Session: id, Origin: core.OriginMCP, Text: "Done: `right`", Final: true})
	s.handle(core.Command{Kind: core.YieldTurn, Session: id, Origin: core.OriginMCP})
}

func stateJSON(tb testing.TB, st uistate.UIState) string {
	tb.Helper()
	b, err := json.MarshalIndent(uistate.Snapshot(st), "", " ")
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// The snapshot equals the snapshot before plus every ui update the stream
// sent since, applied like a client applies them.
func TestSnapshotEqualsStreamedUpdates(t *testing.T) {
	s := newStack(t)
	id := s.newSession("round trip")
	other := s.newSession("other")
	s.conversation(id, 0)
	before := s.snapshot(id)
	c := s.sse("?ui=delta", strconv.FormatUint(before.Seq, 10))
	for round := 1; round <= 3; round++ {
		s.conversation(id, round)
		s.conversation(other, round)
	}
	s.handle(core.Command{Kind: core.Rename, Session: id, Origin: core.OriginAPI, Title: "renamed"})
	s.handle(core.Command{Kind: core.Cancel, Session: id, Origin: "web", Actor: web.Actor})
	after := s.snapshot(id)

	st := before.State
	for st.Seq < after.Seq {
		m := c.next(wait).msg(t)
		if m.Session != id {
			continue
		}
		if m.UI == nil {
			t.Fatalf("event %d (%s) of a session in memory came without its ui update", m.Seq, m.Kind)
		}
		if m.UI.Seq != m.Seq || m.UI.Session != id {
			t.Fatalf("ui update %d/%s for event %d", m.UI.Seq, m.UI.Session, m.Seq)
		}
		st = uistate.ApplyUpdate(st, *m.UI)
	}
	if got, want := stateJSON(t, st), stateJSON(t, after.State); got != want {
		t.Fatalf("streamed state differs from the snapshot:\n%s\nwant\n%s", got, want)
	}
	if len(after.State.Items) < 20 || after.State.Title != "renamed" {
		t.Fatalf("snapshot looks too small: %d items, %q", len(after.State.Items), after.State.Title)
	}
}

// attached returns a second adapter over the same store and bus, which
// builds every state from the log.
func (s *stack) attached(tweak ...func(*web.Options)) (*web.Adapter, *httptest.Server) {
	s.t.Helper()
	o := web.Options{Store: s.store, Bus: s.bus, Handler: s.svc}
	for _, f := range tweak {
		f(&o)
	}
	w := web.New(o)
	srv := httptest.NewServer(w.Handler())
	s.t.Cleanup(func() { w.Close(); srv.Close() })
	return w, srv
}

func fetchState(tb testing.TB, srv *httptest.Server, id core.SessionID) uistate.UISnapshot {
	tb.Helper()
	resp, err := srv.Client().Get(srv.URL + "/api/sessions/" + string(id) + "/state")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var snap uistate.UISnapshot
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("state: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil {
		tb.Fatal(err)
	}
	return snap
}

// A state built from the log equals the one fed live, also after the
// least recently used reducers were dropped and rebuilt.
func TestStateRebuiltFromLogEqualsLive(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.MaxStates = 1 })
	a, b := s.newSession("a"), s.newSession("b")
	s.snapshot(a) // in memory from the start: fed live
	s.conversation(a, 0)
	s.conversation(b, 0)
	live := s.snapshot(a)
	s.snapshot(b) // evicts a
	s.conversation(a, 1)
	rebuilt := s.snapshot(a) // from the log again
	_, srv := s.attached()
	fresh := fetchState(t, srv, a)
	if got, want := stateJSON(t, fresh.State), stateJSON(t, rebuilt.State); got != want {
		t.Fatalf("fresh build differs:\n%s\nwant\n%s", got, want)
	}
	if len(rebuilt.State.Items) <= len(live.State.Items) {
		t.Fatalf("rebuilt state lost items: %d <= %d", len(rebuilt.State.Items), len(live.State.Items))
	}
	// The live part is a prefix of the rebuilt one, item for item.
	for i, it := range live.State.Items {
		if g, w := mustJSON(t, rebuilt.State.Items[i]), mustJSON(t, it); g != w {
			t.Fatalf("item %d: %s, want %s", i, g, w)
		}
	}
}

func mustJSON(tb testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// When the bounded log no longer reaches back to a session's creation, its
// state is seeded from the session and its inbox.
func TestStateSeededWhenLogTruncated(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.store = bolt.Options{NoSync: true, MaxEvents: 20} })
	id := s.newSession("old session")
	path := "/api/sessions/" + string(id)
	must[postedJSON](t, http.StatusOK)(s.post(path+"/messages", `{"text":"first words"}`))
	s.handle(core.Command{Kind: core.AssistantPost, Session: id, Origin: core.OriginMCP, Text: "first reply"})
	s.handle(core.Command{Kind: core.YieldTurn, Session: id, Origin: core.OriginMCP})
	s.handle(core.Command{Kind: core.Ask, Session: id, Origin: core.OriginMCP, QuestionID: "q1",
		Text: "Still there?", Options: []string{"yes", "no"}})
	busy := s.newSession("busy")
	for i := range 40 {
		s.chat(busy, fmt.Sprint("noise ", i))
	}
	if _, err := s.store.EventsSince(context.Background(), 0, 1); err == nil {
		t.Fatal("the log was not truncated; the test proves nothing")
	}

	_, srv := s.attached()
	st := fetchState(t, srv, id).State
	if st.Title != "old session" || st.Status != core.StatusWaiting || st.Turn != 1 {
		t.Fatalf("seeded state %q %s turn %d", st.Title, st.Status, st.Turn)
	}
	want := []struct {
		typ     uistate.UIItemType
		content string
	}{{uistate.UIItemUser, "first words"}, {uistate.UIItemAssistant, "first reply"}, {uistate.UIItemQuestion, "Still there?"}}
	if len(st.Items) != len(want) {
		t.Fatalf("items %+v", st.Items)
	}
	for i, w := range want {
		if st.Items[i].Type != w.typ || st.Items[i].Content != w.content {
			t.Fatalf("item %d = %+v, want %s %q", i, st.Items[i], w.typ, w.content)
		}
	}
	if q := st.Items[2]; q.ID != "q:q1" || len(q.Options) != 2 {
		t.Fatalf("the open question keeps its id and options: %+v", q)
	}

	// New events land on the seeded state: the answer finds its question.
	resp, err := srv.Client().Post(srv.URL+path+"/answer", "application/json",
		jsonBody(`{"question_id":"q1","option":1}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("answer: %v %v", resp, err)
	}
	resp.Body.Close()
	st = fetchState(t, srv, id).State
	if q := st.Items[2]; q.Answer == nil || q.Answer.Content != "yes" || len(st.Items) != 3 {
		t.Fatalf("after the answer: %+v", st.Items)
	}
}

// Reducers rebuilt over and over while their session's events stream in
// (the build reads the log while live events queue up) end up exactly where
// a build after the fact does.
func TestStateBuildsRaceLiveEvents(t *testing.T) {
	s := newStack(t, func(o *stackOptions) { o.web.MaxStates = 1 })
	a, b := s.newSession("a"), s.newSession("b")
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 200 {
			if _, err := s.svc.Handle(context.Background(), core.Command{Kind: core.OutputUpdate, Session: a,
				Origin: core.OriginMCP, Text: fmt.Sprint("step ", i)}); err != nil {
				t.Error(err)
				return
			}
			if i%20 == 19 {
				if _, err := s.svc.Handle(context.Background(), core.Command{Kind: core.YieldTurn, Session: a, Origin: core.OriginMCP}); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		s.snapshot(a)
		s.snapshot(b) // evicts a: the next snapshot of a builds again
	}
	live := s.snapshot(a)
	_, srv := s.attached()
	if g, w := stateJSON(t, live.State), stateJSON(t, fetchState(t, srv, a).State); g != w {
		t.Fatalf("state differs from a fresh build:\n%s\nwant\n%s", g, w)
	}
	if live.State.Turn != 10 || len(live.State.Items) != 10 {
		t.Fatalf("turn %d, %d items; want 10 and 10", live.State.Turn, len(live.State.Items))
	}
}
