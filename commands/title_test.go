package commands_test

import (
	"testing"
	"time"

	"github.com/parley-chat/parley/commands"
	"github.com/parley-chat/parley/core"
)

// titleEvents returns the titles carried by the session_updated events of
// evs.
func titleEvents(evs []core.Event) []string {
	var out []string
	for _, e := range evs {
		if e.Kind == core.EventSessionUpdated {
			out = append(out, e.Title)
		}
	}
	return out
}

// A session started without a title takes the first line of the first
// person's message as its title, announced on the session_updated event
// platforms show titles from; later messages leave it alone.
func TestUntitledSessionTakesFirstMessage(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI}).Session
	if title := e.session(id).Title; title == "" {
		t.Fatal("an untitled session has no placeholder title")
	}
	e.events()

	e.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI,
		Text: "Fix the flaky login test\n\nIt fails one run in ten on CI."})
	if got := e.session(id).Title; got != "Fix the flaky login test" {
		t.Fatalf("title after the first message = %q", got)
	}
	if got := titleEvents(e.events()); len(got) != 1 || got[0] != "Fix the flaky login test" {
		t.Fatalf("session_updated titles = %q, want the new title once", got)
	}

	e.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: "Another topic entirely"})
	if got := e.session(id).Title; got != "Fix the flaky login test" {
		t.Fatalf("a second message changed the title to %q", got)
	}
	if got := titleEvents(e.events()); len(got) != 0 {
		t.Fatalf("a second message while working announced titles %q", got)
	}
}

// Titles a person or an agent chose are never replaced.
func TestChosenTitlesStay(t *testing.T) {
	e := newEnv(t, commands.Options{})
	titled := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginMCP, Title: "Release checklist"}).Session
	renamed := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI}).Session
	e.handle(core.Command{Kind: core.Rename, Session: renamed, Origin: core.OriginAPI, Title: "Named by hand"})
	for id, want := range map[core.SessionID]string{titled: "Release checklist", renamed: "Named by hand"} {
		e.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: "what is left?"})
		if got := e.session(id).Title; got != want {
			t.Errorf("title of %s = %q after a message, want %q", id, got, want)
		}
	}
}

// Platforms that must name a topic or thread before the session exists
// (Telegram's /new without a title) pass a placeholder of the same shape,
// read on their own clock, and say it is one; it is replaced too. A message
// with only a file leaves the placeholder for the first message with text,
// even one queued while the agent works.
func TestAdapterPlaceholderTakesFirstText(t *testing.T) {
	now := time.Date(2026, 11, 23, 21, 4, 0, 0, time.UTC)
	e := newEnv(t, commands.Options{Now: func() time.Time { return now }})
	place := core.Place{Chat: "-100", Thread: "7"}
	id := e.handle(core.Command{Kind: core.CreateSession, Origin: "telegram", Place: place,
		Title: "Session Nov 23 21:03", Placeholder: true}).Session
	if got := e.session(id).Placeholder; got != "Session Nov 23 21:03" {
		t.Fatalf("the session keeps placeholder %q", got)
	}

	e.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: "telegram", Place: place,
		Attachments: []core.Attachment{{Name: "log.txt", Size: 10}}})
	if got := e.session(id).Title; got != "Session Nov 23 21:03" {
		t.Fatalf("a file without text retitled the session to %q", got)
	}
	e.events()

	res := e.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: "telegram", Place: place,
		Text: "# Why does the deploy hang?"})
	if !res.Queued {
		t.Fatal("the message was not queued behind the working agent")
	}
	if got := e.session(id).Title; got != "Why does the deploy hang?" {
		t.Fatalf("title = %q", got)
	}
	evs := e.events()
	if got := titleEvents(evs); len(got) != 1 || got[0] != "Why does the deploy hang?" {
		t.Fatalf("session_updated titles = %q", got)
	}
	for _, ev := range evs {
		if ev.Kind == core.EventSessionUpdated && ev.Status != core.StatusWorking {
			t.Fatalf("the title event says status %q, want working", ev.Status)
		}
	}
}

// A redelivered first message is not appended again, and so changes
// nothing a second time either.
func TestRedeliveredFirstMessageRetitlesOnce(t *testing.T) {
	e := newEnv(t, commands.Options{})
	id := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI}).Session
	e.events()
	cmd := core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: "deploy status", PlatformID: "m1"}
	e.handle(cmd)
	if got := titleEvents(e.events()); len(got) != 1 {
		t.Fatalf("first delivery announced %q", got)
	}
	if res := e.handle(cmd); !res.Duplicate {
		t.Fatal("redelivery not recognised")
	}
	if got := titleEvents(e.events()); len(got) != 0 {
		t.Fatalf("the redelivery announced %q", got)
	}
}

// The placeholder is a value, not a shape: a title a person chose stays
// even when it reads like a placeholder of the very minute, and a session
// renamed away from its placeholder keeps the new name.
func TestPlaceholderIsAValue(t *testing.T) {
	now := time.Date(2026, 11, 23, 21, 4, 0, 0, time.UTC)
	e := newEnv(t, commands.Options{Now: func() time.Time { return now }})
	chosen := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI, Title: "Session Nov 23 21:04"}).Session
	renamed := e.handle(core.Command{Kind: core.CreateSession, Origin: core.OriginAPI}).Session
	if got := e.session(renamed).Placeholder; got != "Session Nov 23 21:04" {
		t.Fatalf("an untitled session keeps placeholder %q", got)
	}
	e.handle(core.Command{Kind: core.Rename, Session: renamed, Origin: core.OriginAPI, Title: "Named by hand"})
	for id, want := range map[core.SessionID]string{chosen: "Session Nov 23 21:04", renamed: "Named by hand"} {
		e.handle(core.Command{Kind: core.SendMessage, Session: id, Origin: core.OriginAPI, Text: "what is left?"})
		if got := e.session(id).Title; got != want {
			t.Errorf("title of %s = %q after a message, want %q", id, got, want)
		}
	}
}
