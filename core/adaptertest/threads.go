package adaptertest

import (
	"errors"
	"strings"
	"testing"

	"github.com/parley-chat/parley/core"
)

// longTitle is longer than any platform's title limit (Telegram's topic
// names take 128 characters): adapters fit titles, they are not refused.
var longTitle = "Conformance " + strings.Repeat("very ", 60) + "long title"

// checkBind: Bind makes a working place per session, its Meta is valid JSON
// that survives the store, a title too long for the platform is fitted,
// and a binding that says what it shows (Shown) is telling the truth.
func checkBind(t *testing.T, e *env) {
	binder, ok := e.Adapter.(core.Binder)
	if !ok {
		t.Skip("the adapter is not a core.Binder")
	}
	first := e.bind(t, "Conformance bind")
	roundTrip(t, first)
	second, err := binder.Bind(ctx(t), e.session(longTitle))
	if err != nil {
		t.Fatalf("Bind of a session with a %d-character title: %v, want the title fitted to the platform", len(longTitle), err)
	}
	roundTrip(t, second)
	if second.Place == first.Place || second.Place.IsZero() {
		t.Errorf("two sessions bound at %+v and %+v: want two places", first.Place, second.Place)
	}
	for _, b := range []core.Binding{first, second} {
		ref := e.send(t, b.Place, "Hello in the new conversation")
		if ok, _ := e.need(t, HookShown); ok {
			if _, shown := e.shown(b.Place, ref.ID); !shown {
				t.Errorf("a message sent at the bound place %+v is not shown there", b.Place)
			}
		}
		if b.Shown == (core.StatusView{}) {
			continue
		}
		// The dispatcher will not show this view again: it must be true.
		if ok, reason := e.need(t, HookTitle); !ok {
			t.Logf("Bind says the platform shows %+v; not checked: %s", b.Shown, reason)
			continue
		}
		want := b.Shown.Title
		if want == longTitle {
			want = words(longTitle)[0]
		}
		if title := e.Title(b.Place); !strings.Contains(title, want) {
			t.Errorf("Bind says the platform shows %+v, but its title is %q", b.Shown, title)
		}
	}
}

// checkThreadGone: a send to a conversation deleted behind the adapter's
// back is core.ErrThreadGone, its messages are gone with it, and binding
// the session again makes a new place that works.
func checkThreadGone(t *testing.T, e *env) {
	binder, ok := e.Adapter.(core.Binder)
	if !ok {
		t.Skip("the adapter is not a core.Binder")
	}
	e.require(t, HookDeleteThread)
	s := e.session("Conformance thread gone")
	b, err := binder.Bind(ctx(t), s)
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	ref := e.send(t, b.Place, "Before the conversation vanished")
	e.DeleteThread(b.Place)
	_, err = e.Adapter.Send(ctx(t), b.Place, core.OutMessage{Kind: core.KindAssistant, Text: "Anyone there?"})
	if !errors.Is(err, core.ErrThreadGone) {
		t.Errorf("Send to a deleted conversation: %v, want core.ErrThreadGone", err)
	}
	if ed, ok := e.Adapter.(core.Editor); ok {
		err := ed.Edit(ctx(t), ref, core.OutMessage{Kind: core.KindOutput, Text: "Edited after the conversation vanished"})
		if !errors.Is(err, core.ErrMessageGone) {
			t.Errorf("Edit of a message in a deleted conversation: %v, want core.ErrMessageGone", err)
		}
	}
	nb, err := binder.Bind(ctx(t), s)
	if err != nil {
		t.Fatalf("Bind again after the conversation vanished: %v", err)
	}
	if nb.Place == b.Place {
		t.Fatalf("Bind again returned the deleted place %+v", b.Place)
	}
	again := e.send(t, nb.Place, "Back in a new conversation")
	if ok, _ := e.need(t, HookShown); ok {
		if _, shown := e.shown(nb.Place, again.ID); !shown {
			t.Errorf("a message sent at the new place %+v is not shown there", nb.Place)
		}
	}
}

// checkStatus: ShowStatus makes the conversation show the title, showing
// the same view again is success, a long title is fitted, and the Meta it
// returns is valid JSON that the next call gets back after the store's
// JSON round trip.
func checkStatus(t *testing.T, e *env) {
	ss, ok := e.Adapter.(core.StatusShower)
	if !ok {
		t.Skip("the adapter is not a core.StatusShower")
	}
	e.require(t, HookTitle)
	b := roundTrip(t, e.binding(t))
	views := []core.StatusView{
		{Title: "Working on the conformance suite", Status: core.StatusWorking},
		{Title: "Waiting for the conformance suite", Status: core.StatusWaiting},
		{Title: "Waiting for the conformance suite", Status: core.StatusWaiting},
		{Title: longTitle, Status: core.StatusIdle},
	}
	for i, v := range views {
		meta, err := ss.ShowStatus(ctx(t), b, v)
		if err != nil {
			what := "ShowStatus"
			if i == 2 {
				what = "ShowStatus of the view already shown (not modified is success)"
			}
			t.Fatalf("%s %+v: %v", what, v, err)
		}
		if meta != nil {
			b.Meta = meta
		}
		b = roundTrip(t, b)
		title := e.Title(b.Place)
		want := v.Title
		if v.Title == longTitle {
			want = words(longTitle)[0]
		}
		if !strings.Contains(title, want) {
			t.Errorf("after ShowStatus %+v the title is %q, want it to contain %q", v, title, want)
		}
	}
}
