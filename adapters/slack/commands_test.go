package slack

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/slack-go/slack"

	"github.com/parley-chat/parley/core"
)

// pacer is a core.Pacer that runs ops at once and records them.
type pacer struct {
	mu  sync.Mutex
	ops []core.Op
}

func (p *pacer) Do(ctx context.Context, op core.Op) error {
	p.mu.Lock()
	p.ops = append(p.ops, op)
	p.mu.Unlock()
	return op.Run(ctx, op.Place)
}

func TestSlashCommands(t *testing.T) {
	tests := []struct {
		name, channel, user, text string
		reply                     string // words of the ephemeral reply; "" for none
	}{
		{name: "help", channel: "C1", user: "U1", text: "help", reply: "each session is a thread"},
		{name: "bare", channel: "C1", user: "U1", text: "", reply: "`!cancel` — ask the agent to stop its turn"},
		{name: "a session's command", channel: "C1", user: "U1", text: "cancel", reply: "Type `!cancel` in the session's thread"},
		{name: "rename", channel: "C1", user: "U1", text: "title New name", reply: "Type `!title NEW TITLE` in the session's thread"},
		{name: "unknown", channel: "C1", user: "U1", text: "frobnicate", reply: "⚠️ Unknown command /parley frobnicate"},
		{name: "another channel", channel: "C7", user: "U1", text: "new", reply: "parley's sessions live in <#C1>"},
		{name: "a stranger", channel: "C1", user: "U666", text: "help"},
		{name: "a stranger elsewhere", channel: "C7", user: "U666", text: "new"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := newFakeAPI(t)
			h := newRecorder("U1")
			a := newTestAdapter(t, api, withAuthorizer(h))
			r, err := a.onSlash(context.Background(), h, slack.SlashCommand{Command: "/parley", ChannelID: tt.channel, UserID: tt.user, Text: tt.text, TriggerID: "tr1"})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.reply == "" && r != nil:
				t.Errorf("replied %+v, want silence", r)
			case tt.reply != "" && (r == nil || r.ResponseType != "ephemeral" || !strings.Contains(r.Text, tt.reply)):
				t.Errorf("reply %+v, want an ephemeral one with %q", r, tt.reply)
			}
			if n := len(h.commands()) + len(api.called("")); n != 0 {
				t.Errorf("%d commands and calls, want none: %q", n, shows(h.commands()))
			}
		})
	}
}

// TestSlashNew: /parley new posts a root (through the pacer) and starts the
// session in its thread; a retry after a failed append posts no second
// root; a redelivery after a restart deletes the root it posted again.
func TestSlashNew(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("500.1"))
	pc := &pacer{}
	h := newRecorder("U1")
	a := newTestAdapter(t, api, func(o *Options) { o.Pacer = pc }, withAuthorizer(h))
	fail := true
	h.answer = func(c core.Command) (core.Result, error) {
		if fail {
			fail = false
			return core.Result{}, errors.New("store busy")
		}
		return core.Result{Session: "S5"}, nil
	}
	c := slack.SlashCommand{Command: "/parley", ChannelID: "C1", UserID: "U1", Text: "new Release 1.2", TriggerID: "tr9"}
	if _, err := a.onSlash(context.Background(), h, c); err == nil {
		t.Fatal("a failed append should be retried")
	}
	r, err := a.onSlash(context.Background(), h, c)
	if err != nil || r != nil {
		t.Fatalf("onSlash = %+v, %v", r, err)
	}
	sameList(t, methods(api.called("")), []string{"chat.postMessage text=💬 *Release 1.2*"})
	if len(pc.ops) != 1 || pc.ops[0].Kind != core.OpSend || pc.ops[0].Place != (core.Place{Chat: "C1"}) {
		t.Errorf("paced ops %+v, want one send in the channel", pc.ops)
	}
	want := `create_session C1/500.1 id=new:slash:tr9 by=U1(Ann) title="Release 1.2"`
	if got := shows(h.commands()); len(got) != 2 || got[1] != want {
		t.Errorf("commands %q, want twice %q", got, want)
	}
	if o, _ := a.roots.Load(core.Place{Chat: "C1", Thread: "500.1"}); o != ownerBot {
		t.Error("the root's owner is not remembered")
	}

	h.answer = func(core.Command) (core.Result, error) { return core.Result{Session: "S5", Duplicate: true}, nil }
	if _, err := a.onSlash(context.Background(), h, c); err != nil {
		t.Fatal(err)
	}
	if d := api.called("chat.delete"); len(d) != 1 || d[0].Form.Get("ts") != "500.1" {
		t.Errorf("the second root was not deleted: %v", d)
	}
}

// TestNewInThread: "!new" typed in a thread starts another session with a
// root of its own in the same channel.
func TestNewInThread(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("600.1"))
	h := newRecorder("U1")
	a := newTestAdapter(t, api, withAuthorizer(h))
	ev := event(t, `{"type":"message","channel":"C1","user":"U1","text":"!new Side quest","ts":"101.0","thread_ts":"100.1"}`)
	if err := a.onEvent(context.Background(), h, ev); err != nil {
		t.Fatal(err)
	}
	sameList(t, shows(h.commands()), []string{`create_session C1/600.1 id=new:C1:101.0 by=U1(Ann) title="Side quest"`})
	if c := api.called("chat.postMessage")[0].Form; c.Get("thread_ts") != "" || c.Get("channel") != "C1" {
		t.Errorf("root posted as %v", c)
	}
}

// TestNewRootRefused: a root Slack refuses for good is explained, not
// retried.
func TestNewRootRefused(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", func(url.Values) answer { return failAnswer("not_in_channel") })
	h := newRecorder("U1")
	a := newTestAdapter(t, api, withAuthorizer(h))
	_, err := a.onSlash(context.Background(), h, slack.SlashCommand{ChannelID: "C1", UserID: "U1", Text: "new", TriggerID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	cmds := h.commands()
	if len(cmds) != 1 || cmds[0].Kind != core.Notice || !strings.Contains(cmds[0].Text, "/invite") {
		t.Errorf("commands %q, want a notice saying to invite the bot", shows(cmds))
	}
}

// TestSlashNewUntitled: /parley new without a title names its root message
// with a placeholder, and the session is told it is one, so the first
// message with text names it; a title given is not one.
func TestSlashNewUntitled(t *testing.T) {
	api := newFakeAPI(t)
	api.on("chat.postMessage", posted("500.2"))
	a := newTestAdapter(t, api, withAuthorizer(newRecorder("U1")))
	h := newRecorder("U1")
	h.answer = func(core.Command) (core.Result, error) { return core.Result{Session: "S6"}, nil }
	if _, err := a.onSlash(context.Background(), h, slack.SlashCommand{Command: "/parley", ChannelID: "C1", UserID: "U1", Text: "new", TriggerID: "tr10"}); err != nil {
		t.Fatal(err)
	}
	cmds := h.commands()
	if len(cmds) != 1 || !cmds[0].Placeholder || !strings.HasPrefix(cmds[0].Title, "Session ") {
		t.Fatalf("commands %+v, want one create_session with a placeholder title", cmds)
	}
	sameList(t, methods(api.called("")), []string{"chat.postMessage text=💬 *" + cmds[0].Title + "*"})

	h = newRecorder("U1")
	h.answer = func(core.Command) (core.Result, error) { return core.Result{Session: "S7"}, nil }
	if _, err := a.onSlash(context.Background(), h, slack.SlashCommand{Command: "/parley", ChannelID: "C1", UserID: "U1", Text: "new Session Nov 23 21:04", TriggerID: "tr11"}); err != nil {
		t.Fatal(err)
	}
	if cmds := h.commands(); len(cmds) != 1 || cmds[0].Placeholder || cmds[0].Title != "Session Nov 23 21:04" {
		t.Fatalf("commands %+v, want a chosen title", cmds)
	}
}
