package inbound_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/chatcmd"
	"github.com/parley-chat/parley/adapters/inbound"
	"github.com/parley-chat/parley/core"
)

// handler records the commands it gets and answers them with answer.
type handler struct {
	got    []core.Command
	answer func(core.Command) (core.Result, error)
}

func (h *handler) Handle(_ context.Context, cmd core.Command) (core.Result, error) {
	h.got = append(h.got, cmd)
	if h.answer == nil {
		return core.Result{Session: "s1"}, nil
	}
	return h.answer(cmd)
}

// notices are the texts of the notices h got.
func (h *handler) notices() []string {
	var out []string
	for _, c := range h.got {
		if c.Kind == core.Notice {
			out = append(out, c.Text)
		}
	}
	return out
}

// failing answers commands of kind with err, the rest with success.
func failing(kind core.CommandKind, err error) func(core.Command) (core.Result, error) {
	return func(c core.Command) (core.Result, error) {
		if c.Kind == kind {
			return core.Result{}, err
		}
		return core.Result{Session: "s1"}, nil
	}
}

var base = core.Command{Origin: "telegram", Actor: core.Actor{ID: "7", Name: "Ann"},
	Place: core.Place{Chat: "-100", Thread: "3"}, PlatformID: "-100:55",
	Ref: core.MessageRef{Adapter: "telegram", Place: core.Place{Chat: "-100", Thread: "3"}, ID: "55"}}

func telegramInput(log *slog.Logger) inbound.Input {
	return inbound.Input{Log: log, PlaceKey: "chat", AfterClosed: "/new starts another one.", NoSession: "/new starts one."}
}

// A notice is the person's command made a notice: for the same place and
// person, with no message reference or dedup key of its own and nothing
// else the input carried.
func TestNotice(t *testing.T) {
	h := &handler{}
	in := telegramInput(nil)
	withFile := base
	withFile.Kind, withFile.Title, withFile.Placeholder = core.CreateSession, "Session Nov 23 21:04", true
	withFile.Attachments = []core.Attachment{{Name: "log.txt"}}
	in.Notice(t.Context(), h, withFile, "📎 Received log.txt")
	in.NoticeFor(t.Context(), h, base, "🎤 hello", core.LifetimeNextInput)
	want := []core.Command{
		{Kind: core.Notice, Origin: "telegram", Actor: base.Actor, Place: base.Place, Text: "📎 Received log.txt", Lifetime: core.LifetimeNextNotice},
		{Kind: core.Notice, Origin: "telegram", Actor: base.Actor, Place: base.Place, Text: "🎤 hello", Lifetime: core.LifetimeNextInput},
	}
	if fmt.Sprint(h.got) != fmt.Sprint(want) {
		t.Fatalf("handled\n%+v\nwant\n%+v", h.got, want)
	}
}

// A notice that cannot be stored is logged, except for people the
// allow-list refuses, who are told nothing.
func TestNoticeNotStored(t *testing.T) {
	var logs bytes.Buffer
	in := telegramInput(slog.New(slog.NewTextHandler(&logs, nil)))
	in.Notice(t.Context(), &handler{answer: failing(core.Notice, core.ErrUnauthorized)}, base, "hi")
	if logs.Len() != 0 {
		t.Fatalf("a refused stranger's notice was logged: %s", logs.String())
	}
	in.Notice(t.Context(), &handler{answer: failing(core.Notice, errors.New("disk full"))}, base, "hi")
	if got := logs.String(); !strings.Contains(got, `msg="notice not stored" chat=-100 err="disk full"`) {
		t.Fatalf("log = %q", got)
	}
}

// Settle: the Handler's refusals settle the input and are told in its words
// with the platform's hints; any other error means "try again", told
// nothing.
func TestSettle(t *testing.T) {
	other := errors.New("store busy")
	tests := []struct {
		name    string
		err     error
		settled bool
		notice  string
	}{
		{"stored", nil, true, ""},
		{"stranger", core.ErrUnauthorized, true, ""},
		{"closed", core.ErrSessionClosed, true, "✅ This session is closed. /new starts another one."},
		{"no session", core.ErrNotFound, true, "There is no session here. /new starts one."},
		{"invalid", &core.UserError{Msg: "the file is too large", Err: core.ErrInvalid}, true, "⚠️ The file is too large"},
		{"not stored", other, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &handler{}
			ok, err := telegramInput(nil).Settle(t.Context(), h, base, tt.err)
			if ok != tt.settled {
				t.Errorf("settled = %v, want %v", ok, tt.settled)
			}
			if tt.settled && err != nil || !tt.settled && err != tt.err {
				t.Errorf("err = %v", err)
			}
			var want []string
			if tt.notice != "" {
				want = []string{tt.notice}
			}
			if got := h.notices(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("notices %q, want %q", got, want)
			}
		})
	}
}

// Submit hands the command over and settles the answer.
func TestSubmit(t *testing.T) {
	h := &handler{answer: failing(core.SendMessage, core.ErrSessionClosed)}
	cmd := base
	cmd.Kind, cmd.Text = core.SendMessage, "hello"
	if _, err := telegramInput(nil).Submit(t.Context(), h, base, cmd); err != nil {
		t.Fatalf("a refusal was not settled: %v", err)
	}
	if len(h.got) != 2 || h.got[0].Text != "hello" || h.got[1].Kind != core.Notice {
		t.Fatalf("handled %+v, want the message and a notice", h.got)
	}
	h = &handler{answer: failing(core.SendMessage, errors.New("store busy"))}
	if _, err := telegramInput(nil).Submit(t.Context(), h, base, cmd); err == nil {
		t.Fatal("a failure to store settled the input")
	}
	res, err := telegramInput(nil).Submit(t.Context(), &handler{}, base, cmd)
	if err != nil || res.Session != "s1" {
		t.Fatalf("Submit = %+v, %v", res, err)
	}
}

// Command runs the commands people type: help and mistyped commands are
// answered with a notice, new by the adapter, status and the others by the
// Handler.
func TestCommand(t *testing.T) {
	var newTitle, newAgent *string
	cmds := inbound.Commands{
		Parser: chatcmd.Parser{Prefix: "/"},
		New: func(_ context.Context, title, agent string) error {
			newTitle, newAgent = &title, &agent
			return nil
		},
	}
	t.Run("text", func(t *testing.T) {
		h := &handler{}
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "hello /new"); ok || err != nil || len(h.got) != 0 {
			t.Fatalf("Command = %v, %v, handled %+v", ok, err, h.got)
		}
	})
	t.Run("mistyped", func(t *testing.T) {
		h := &handler{}
		ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/frobnicate")
		if !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		if got := h.notices(); len(got) != 1 || got[0] != "⚠️ unknown command /frobnicate; send /help for the list" {
			t.Fatalf("notices %q", got)
		}
		h = &handler{}
		in := telegramInput(nil)
		in.CapitalizeErrors = true
		_, _ = in.Command(t.Context(), h, base, cmds, "/frobnicate")
		if got := h.notices(); len(got) != 1 || got[0] != "⚠️ Unknown command /frobnicate; send /help for the list" {
			t.Fatalf("capitalized: notices %q", got)
		}
	})
	t.Run("help", func(t *testing.T) {
		h := &handler{}
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/help"); !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		want := "parley commands:\n" + cmds.Parser.Help()
		if got := h.notices(); len(got) != 1 || got[0] != want {
			t.Fatalf("notices %q, want %q", got, want)
		}
		own := cmds
		own.Help = func() string { return "each session is a thread" }
		h = &handler{}
		_, _ = telegramInput(nil).Command(t.Context(), h, base, own, "/start")
		if got := h.notices(); len(got) != 1 || got[0] != "each session is a thread" {
			t.Fatalf("own help: notices %q", got)
		}
	})
	t.Run("new", func(t *testing.T) {
		h := &handler{}
		newTitle = nil
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/new Release plan"); !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		if newTitle == nil || *newTitle != "Release plan" || len(h.got) != 0 {
			t.Fatalf("New got %v, handler %+v", newTitle, h.got)
		}
		failed := cmds
		failed.New = func(context.Context, string, string) error { return errBusy }
		if _, err := telegramInput(nil).Command(t.Context(), h, base, failed, "/new"); !errors.Is(err, errBusy) {
			t.Fatalf("New's error = %v, want it returned", err)
		}
	})
	t.Run("new with an agent", func(t *testing.T) {
		// The agent is checked before the adapter makes a place.
		h := &handler{}
		newTitle, newAgent = nil, nil
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/new --agent codex Fix the build"); !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		if newTitle == nil || *newTitle != "Fix the build" || *newAgent != "codex" || len(h.got) != 1 ||
			h.got[0].Kind != core.CheckAgent || h.got[0].Agent != "codex" {
			t.Fatalf("New got %v %v, handler %+v", newTitle, newAgent, h.got)
		}
		unknown := &core.UserError{Msg: `there is no agent "codx"; the agents are: default, codex`, Err: core.ErrInvalid}
		h = &handler{answer: failing(core.CheckAgent, unknown)}
		newTitle = nil
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/new --agent codx Fix"); !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		if newTitle != nil {
			t.Fatal("a session was started with an unknown agent")
		}
		if got := h.notices(); len(got) != 1 || !strings.Contains(got[0], `here is no agent "codx"; the agents are: default, codex`) {
			t.Fatalf("notices %q", got)
		}
		h = &handler{answer: failing(core.CheckAgent, errBusy)}
		if _, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/new --agent codex"); !errors.Is(err, errBusy) || newTitle != nil {
			t.Fatalf("a failing check = %v, want it returned and no session", err)
		}
		h = &handler{}
		if _, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/new --agent"); err != nil || newTitle != nil {
			t.Fatalf("a flag without a name = %v", err)
		}
		if got := h.notices(); len(got) != 1 || !strings.Contains(got[0], "--agent needs the agent's name") {
			t.Fatalf("notices %q", got)
		}
	})
	t.Run("status", func(t *testing.T) {
		h := &handler{}
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/status"); !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		want := base
		want.Kind = core.StatusQuery
		if len(h.got) != 1 || fmt.Sprint(h.got[0]) != fmt.Sprint(want) {
			t.Fatalf("handled %+v, want %+v", h.got, want)
		}
	})
	t.Run("built", func(t *testing.T) {
		h := &handler{}
		if ok, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/title Release plan"); !ok || err != nil {
			t.Fatalf("Command = %v, %v", ok, err)
		}
		want := base
		want.Kind, want.Title = core.Rename, "Release plan"
		if len(h.got) != 1 || fmt.Sprint(h.got[0]) != fmt.Sprint(want) {
			t.Fatalf("handled %+v, want %+v", h.got, want)
		}
		// A refusal is told and settles the command; a failure to
		// store it is for the platform to deliver again.
		h = &handler{answer: failing(core.Cancel, core.ErrNotFound)}
		if _, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/cancel"); err != nil {
			t.Fatalf("refused: err = %v", err)
		}
		if got := h.notices(); len(got) != 1 || got[0] != "There is no session here. /new starts one." {
			t.Fatalf("notices %q", got)
		}
		h = &handler{answer: failing(core.Close, errBusy)}
		if _, err := telegramInput(nil).Command(t.Context(), h, base, cmds, "/close"); !errors.Is(err, errBusy) {
			t.Fatalf("not stored: err = %v, want it returned", err)
		}
	})
}

func TestPlaceholderTitle(t *testing.T) {
	at := time.Date(2026, 11, 23, 21, 4, 59, 0, time.FixedZone("CET", 3600))
	if got := inbound.PlaceholderTitle(at); got != "Session Nov 23 20:04" {
		t.Fatalf("PlaceholderTitle = %q, want the minute in UTC", got)
	}
}
