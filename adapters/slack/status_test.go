package slack

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

// methods lists the calls made, as "method param", for comparison.
func methods(calls []apiCall) []string {
	var out []string
	for _, c := range calls {
		s := c.Method
		for _, k := range []string{"ts", "name", "thread_ts", "text"} {
			if v := c.Form.Get(k); v != "" {
				s += " " + k + "=" + v
			}
		}
		out = append(out, s)
	}
	return out
}

func TestBind(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("400.1"))
	a := newTestAdapter(t, api)
	s := core.Session{ID: "S1", Title: "From the web", Status: core.StatusWorking}
	b, err := a.Bind(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := core.Binding{Place: core.Place{Chat: "C1", Thread: "400.1"}, Meta: meta{Owner: ownerBot}.raw(), Shown: core.StatusView{Title: "From the web", Status: core.StatusWorking}}
	if b.Place != want.Place || string(b.Meta) != string(want.Meta) || b.Shown != want.Shown {
		t.Errorf("Bind = %+v, want %+v", b, want)
	}
	sameList(t, methods(api.called("")), []string{"chat.postMessage text=⏳ *From the web*"})
	if a.BindPlace() != (core.Place{Chat: "C1"}) {
		t.Errorf("BindPlace = %+v", a.BindPlace())
	}
}

// TestShowStatusBotRoot: a root parley posted shows status and title
// itself, edited in place.
func TestShowStatusBotRoot(t *testing.T) {
	api := newFakeAPI(t)
	a := newTestAdapter(t, api)
	b := core.Binding{Place: core.Place{Chat: "C1", Thread: "400.1"}, Meta: meta{Owner: ownerBot}.raw()}
	m, err := a.ShowStatus(context.Background(), b, core.StatusView{Title: "Renamed", Status: core.StatusWaiting})
	if err != nil || m != nil {
		t.Fatalf("ShowStatus = %s, %v; want no new meta", m, err)
	}
	sameList(t, methods(api.called("")), []string{"chat.update ts=400.1 text=❓ *Renamed*"})

	// /parley new made this root: known without asking Slack.
	p := core.Place{Chat: "C1", Thread: "401.1"}
	a.remember(p, ownerBot)
	m, err = a.ShowStatus(context.Background(), core.Binding{Place: p}, core.StatusView{Title: "New", Status: core.StatusIdle})
	if err != nil || parseMeta(m).Owner != ownerBot {
		t.Errorf("ShowStatus = %s, %v; want the owner noted", m, err)
	}

	api.on("chat.update", func(url.Values) answer { return failAnswer("message_not_found") })
	if _, err := a.ShowStatus(context.Background(), b, core.StatusView{Title: "x"}); !core.IsPermanent(err) {
		t.Errorf("ShowStatus on a deleted root: %v, want permanent", err)
	}
}

// TestShowStatusPersonRoot: a person's root gets a status reaction,
// swapped on changes, and a header reply once the session is renamed.
func TestShowStatusPersonRoot(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("402.9"))
	a := newTestAdapter(t, api)
	ctx := context.Background()
	p := core.Place{Chat: "C1", Thread: "402.1"}
	a.remember(p, ownerPerson)
	b := core.Binding{Place: p}
	steps := []struct {
		v     core.StatusView
		calls []string
	}{
		{core.StatusView{Title: "Fix the test", Status: core.StatusIdle}, []string{"reactions.add name=speech_balloon"}},
		{core.StatusView{Title: "Fix the test", Status: core.StatusWorking},
			[]string{"reactions.add name=hourglass_flowing_sand", "reactions.remove name=speech_balloon"}},
		{core.StatusView{Title: "Fix all tests", Status: core.StatusWorking}, []string{"chat.postMessage thread_ts=402.1 text=🏷 *Fix all tests*"}},
		{core.StatusView{Title: "Fix every test", Status: core.StatusIdle},
			[]string{"reactions.add name=speech_balloon", "reactions.remove name=hourglass_flowing_sand", "chat.update ts=402.9 text=🏷 *Fix every test*"}},
	}
	seen := 0
	for i, st := range steps {
		m, err := a.ShowStatus(ctx, b, st.v)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if m != nil {
			b.Meta = roundTrip(t, m)
		}
		b.Shown = st.v
		calls := api.called("")
		sameList(t, methods(calls[seen:]), st.calls)
		seen = len(calls)
	}
	if got := parseMeta(b.Meta); got != (meta{Owner: ownerPerson, Title: "Fix the test", Header: "402.9", Reaction: "speech_balloon"}) {
		t.Errorf("meta %+v", got)
	}
}

// TestShowStatusFindsOwner: after a restart the adapter does not know who
// wrote the root; Slack's refusal to edit a person's message tells it.
func TestShowStatusFindsOwner(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.update", func(url.Values) answer { return failAnswer("cant_update_message") })
	a := newTestAdapter(t, api)
	b := core.Binding{Place: core.Place{Chat: "C1", Thread: "403.1"}}
	m, err := a.ShowStatus(context.Background(), b, core.StatusView{Title: "Hello", Status: core.StatusWorking})
	if err != nil {
		t.Fatal(err)
	}
	if got := parseMeta(m); got.Owner != ownerPerson || got.Reaction != "hourglass_flowing_sand" || got.Title != "Hello" {
		t.Errorf("meta %+v", got)
	}
	sameList(t, methods(api.called("")), []string{"chat.update ts=403.1 text=⏳ *Hello*", "reactions.add name=hourglass_flowing_sand"})
}

func roundTrip(t *testing.T, m json.RawMessage) json.RawMessage {
	t.Helper()
	var v any
	if err := json.Unmarshal(m, &v); err != nil {
		t.Fatalf("meta %q is not JSON: %v", m, err)
	}
	out, _ := json.Marshal(v)
	if !strings.HasPrefix(string(out), "{") {
		t.Fatalf("meta %s", out)
	}
	return out
}
