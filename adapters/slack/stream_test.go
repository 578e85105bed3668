package slack_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parley-chat/parley/adapters/slack"
	"github.com/parley-chat/parley/adapters/slack/slacktest"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/adaptertest"
	"github.com/parley-chat/parley/core/delivery"
)

// streamEnv is a fake Slack with one channel, Ann in it, and a thread she
// started.
type streamEnv struct {
	srv     *slacktest.Server
	channel string
	ann     slacktest.User
	place   core.Place
}

func newStreamEnv(t *testing.T, opts slacktest.Options) *streamEnv {
	t.Helper()
	srv := slacktest.NewServer(t, opts)
	e := &streamEnv{srv: srv, channel: srv.NewChannel("sessions"), ann: srv.NewUser("Ann")}
	e.place = core.Place{Chat: e.channel, Thread: srv.Post(e.ann, e.channel, "", "Explain the retry loop")}
	return e
}

// adapter is a checked adapter with streaming on, addressing streams to
// Ann, its methods paced by an outbox of its own as the daemon's does.
func (e *streamEnv) adapter(t *testing.T) *slack.Adapter {
	t.Helper()
	methods := &lateMethods{}
	a, err := slack.New(slack.Options{BotToken: e.srv.BotToken, AppToken: e.srv.AppToken, APIURL: e.srv.URL, Channel: e.channel,
		Stream: true, Recipients: []string{e.ann.ID}, Authorizer: adaptertest.Everyone, Files: tempFiles(t), Logger: slog.New(slog.DiscardHandler), MethodPacer: methods})
	if err != nil {
		t.Fatal(err)
	}
	methods.o = delivery.NewOutbox(delivery.OutboxOptions{}, a)
	t.Cleanup(methods.o.Close)
	if err := a.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	return a
}

// lateMethods is the outbox as the adapter's MethodPacer: the outbox reads
// the adapter's limits, so it is made after the adapter.
type lateMethods struct{ o *delivery.Outbox }

func (m *lateMethods) TakeMethod(a core.AdapterName, p core.Place, method string) time.Duration {
	return m.o.TakeMethod(a, p, method)
}

// methods counts the calls made since call n, by method.
func (e *streamEnv) methods(n int) map[string]int {
	out := map[string]int{}
	for _, c := range e.srv.Calls()[n:] {
		out[c.Method]++
	}
	return out
}

func (e *streamEnv) shows(t *testing.T, ts, want string) {
	t.Helper()
	m, ok := e.srv.Message(e.channel, ts)
	if !ok {
		t.Fatalf("message %s not found", ts)
	}
	if got := shownText(m); got != want {
		t.Fatalf("message shows %q, want %q", got, want)
	}
}

func (e *streamEnv) replies() int {
	n := 0
	for _, m := range e.srv.Replies(e.channel, e.place.Thread) {
		if m.BotID != "" && !m.Deleted {
			n++
		}
	}
	return n
}

func output(text string) core.OutMessage {
	return core.OutMessage{Kind: core.KindOutput, Text: text, Silent: true}
}

func sameCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// An output that grows is started and appended to; a rewrite stops the
// stream and goes through chat.update; the turn's "done" ends an open
// stream before it is posted.
func TestStreamGrowthAndRewrite(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{Streaming: true, Limits: true})
	a := e.adapter(t)
	n := len(e.srv.Calls())
	r, err := a.Send(t.Context(), e.place, output("Hello"))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"Hello, wor", "Hello, world", "Hello, world"} {
		if err := a.Edit(t.Context(), r, output(text)); err != nil {
			t.Fatal(err)
		}
	}
	e.shows(t, r.ID, "Hello, world")
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.startStream": 1, "chat.appendStream": 2}) {
		t.Fatalf("calls %v: want one start and two appends (an unchanged text makes no call)", got)
	}
	n = len(e.srv.Calls())
	if err := a.Edit(t.Context(), r, output("Goodbye")); err != nil {
		t.Fatal(err)
	}
	e.shows(t, r.ID, "Goodbye")
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.stopStream": 1, "chat.update": 1}) {
		t.Fatalf("calls %v: a rewrite stops the stream and updates", got)
	}
	// A new stream, ended by the turn's "done".
	r2, err := a.Send(t.Context(), e.place, output("Second turn"))
	if err != nil {
		t.Fatal(err)
	}
	n = len(e.srv.Calls())
	if _, err := a.Send(t.Context(), e.place, core.OutMessage{Kind: core.KindTurnDone, Text: "Done"}); err != nil {
		t.Fatal(err)
	}
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.stopStream": 1, "chat.postMessage": 1}) {
		t.Fatalf("calls %v: the done message ends the open stream", got)
	}
	e.shows(t, r2.ID, "Second turn")
	if e.replies() != 3 || e.srv.RateLimited() != 0 {
		t.Fatalf("%d bot replies, %d 429s; want 3 and none", e.replies(), e.srv.RateLimited())
	}
}

// A workspace without streaming refuses chat.startStream: the output is
// posted and edited with chat.update, and the refusal is remembered, so
// the next turn asks no more.
func TestStreamRefusedFallsBack(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{StreamingRefusal: "access_denied"})
	a := e.adapter(t)
	n := len(e.srv.Calls())
	r, err := a.Send(t.Context(), e.place, output("Hello"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Edit(t.Context(), r, output("Hello, world")); err != nil {
		t.Fatal(err)
	}
	e.shows(t, r.ID, "Hello, world")
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.startStream": 1, "chat.postMessage": 1, "chat.update": 1}) {
		t.Fatalf("calls %v: one refused start, then post and update", got)
	}
	if got := a.StreamRefused(); got != "access_denied" {
		t.Fatalf("StreamRefused = %q, want access_denied", got)
	}
	// The next turn's output: within the second of the last post, the
	// adapter keeps to the channel's one post a second itself (with
	// streaming on the outbox does not count edits against it); then the
	// refusal is remembered and it is posted.
	posted := e.srv.Calls()[len(e.srv.Calls())-2].Time
	n = len(e.srv.Calls())
	_, err = a.Send(t.Context(), e.place, output("Next turn"))
	var rl *core.RateLimitError
	if !errors.As(err, &rl) || rl.Scope != core.ScopeConversation || len(e.srv.Calls()) != n {
		t.Fatalf("a second post within the second: %v, %d calls; want a wait and no call", err, len(e.srv.Calls())-n)
	}
	<-time.After(time.Until(posted.Add(time.Second)))
	if _, err := a.Send(t.Context(), e.place, output("Next turn")); err != nil {
		t.Fatal(err)
	}
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.postMessage": 1}) {
		t.Fatalf("calls %v: the refusal is remembered", got)
	}
}

// After a restart (a new adapter, as after kill -9) the stream is not
// known: the next edit is chat.update of the same message, which Slack
// refuses while it streams; the stream is stopped and the message
// updated — never a second message.
func TestStreamResumesAfterRestart(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{Streaming: true, Limits: true})
	r, err := e.adapter(t).Send(t.Context(), e.place, output("Half of the"))
	if err != nil {
		t.Fatal(err)
	}
	a := e.adapter(t) // the restarted daemon
	n := len(e.srv.Calls())
	if err := a.Edit(t.Context(), r, output("Half of the answer, and the rest")); err != nil {
		t.Fatal(err)
	}
	e.shows(t, r.ID, "Half of the answer, and the rest")
	var seq []string
	for _, c := range e.srv.Calls()[n:] {
		seq = append(seq, c.Method+":"+c.Error)
	}
	want := "chat.update:streaming_state_conflict chat.stopStream: chat.update:"
	if strings.Join(seq, " ") != want {
		t.Fatalf("calls %q, want %q", seq, want)
	}
	if e.replies() != 1 {
		t.Fatalf("%d bot replies, want the one output message", e.replies())
	}
}

// A stream Slack ended on its own (five minutes after its start) refuses
// the append; the edit goes through chat.update.
func TestStreamExpiredFallsBack(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{Streaming: true})
	a := e.adapter(t)
	r, err := a.Send(t.Context(), e.place, output("Hello"))
	if err != nil {
		t.Fatal(err)
	}
	e.srv.EndStream(e.place.Chat, r.ID)
	n := len(e.srv.Calls())
	if err := a.Edit(t.Context(), r, output("Hello, world")); err != nil {
		t.Fatal(err)
	}
	e.shows(t, r.ID, "Hello, world")
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.appendStream": 1, "chat.update": 1}) {
		t.Fatalf("calls %v: the refused append, then chat.update", got)
	}
}

// With chat.appendStream's budget spent, an edit asks the outbox to come
// back later for this conversation only, and Slack is not called.
func TestStreamBudgetSpent(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{Streaming: true, Limits: true})
	a := e.adapter(t)
	r, err := a.Send(t.Context(), e.place, output("x"))
	if err != nil {
		t.Fatal(err)
	}
	text := "x"
	for i := range 100 {
		text += "y"
		if err := a.Edit(t.Context(), r, output(text)); err != nil {
			t.Fatalf("append %d: %v", i+1, err)
		}
	}
	n := len(e.srv.Calls())
	err = a.Edit(t.Context(), r, output(text+"z"))
	var rl *core.RateLimitError
	if !errors.As(err, &rl) || rl.Scope != core.ScopeConversation || rl.RetryAfter <= 0 || rl.RetryAfter > time.Minute {
		t.Fatalf("101st append: %v, want a wait for this conversation", err)
	}
	if got := len(e.srv.Calls()) - n; got != 0 || e.srv.RateLimited() != 0 {
		t.Fatalf("%d calls, %d 429s after the budget was spent; want none", got, e.srv.RateLimited())
	}
}

// The declared limits: with streaming, edits are paced at
// chat.appendStream's budget, every second, and not against the channel's
// one post a second; every method an edit may become has its own budget.
func TestStreamCapabilities(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{Streaming: true})
	c := e.adapter(t).Capabilities()
	if c.EditInterval != time.Second {
		t.Errorf("EditInterval = %v, want 1s", c.EditInterval)
	}
	edits := 0
	methods := map[string]core.Limit{}
	for _, l := range c.Limits {
		for _, m := range l.Methods {
			methods[m] = l
		}
		if len(l.Methods) > 0 {
			continue
		}
		if l.Scope == core.ScopeGroup && (l.Applies(core.OpEdit) || !l.Applies(core.OpSend)) {
			t.Errorf("limit %+v: the channel's second is for posts, not appends", l)
		}
		if l.Scope == core.ScopeAccount && l.Applies(core.OpEdit) && l.Rate.Per == time.Minute {
			edits = l.Rate.N
			if l.Applies(core.OpRename) {
				t.Errorf("limit %+v: renames would share the appends' budget", l)
			}
		}
	}
	if edits != 100 {
		t.Errorf("edits per minute = %d, want 100, chat.appendStream's", edits)
	}
	for m, want := range map[string]core.Limit{
		"chat.postMessage":  {Scope: core.ScopeGroup, Rate: core.Rate{N: 1, Per: time.Second}},
		"chat.startStream":  {Scope: core.ScopeAccount, Rate: core.Rate{N: 20, Per: time.Minute}},
		"chat.appendStream": {Scope: core.ScopeAccount, Rate: core.Rate{N: 100, Per: time.Minute}},
		"chat.stopStream":   {Scope: core.ScopeAccount, Rate: core.Rate{N: 20, Per: time.Minute}},
		"chat.update":       {Scope: core.ScopeAccount, Rate: core.Rate{N: 50, Per: time.Minute}},
	} {
		if l, ok := methods[m]; !ok || l.Scope != want.Scope || l.Rate != want.Rate || len(l.Kinds) > 0 {
			t.Errorf("limit on %s: %+v, want %v per %v scope, on the method only", m, l, want.Rate, want.Scope)
		}
	}
}

// With chat.startStream's 20 a minute spent, the next turn's output is
// posted instead (the outbox paced it as a post), within the channel's
// second: no call is refused.
func TestStreamStartSpentPosts(t *testing.T) {
	e := newStreamEnv(t, slacktest.Options{Streaming: true, Limits: true})
	a := e.adapter(t)
	n := len(e.srv.Calls())
	for i := range 21 {
		p := core.Place{Chat: e.channel, Thread: e.srv.Post(e.ann, e.channel, "", "Question")}
		if _, err := a.Send(t.Context(), p, output("Answer")); err != nil {
			t.Fatalf("output %d: %v", i+1, err)
		}
	}
	if got := e.methods(n); !sameCounts(got, map[string]int{"chat.startStream": 20, "chat.postMessage": 1}) {
		t.Fatalf("calls %v: want 20 starts, then a post", got)
	}
	if e.srv.RateLimited() != 0 {
		t.Fatalf("%d 429s, want none", e.srv.RateLimited())
	}
}
