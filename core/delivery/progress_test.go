package delivery_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// tool stores a tool event the way the command service does (the call in
// the session, the event with the turn) and dispatches it.
func (r *rig) tool(id core.SessionID, kind core.EventKind, c core.ToolCall) {
	r.t.Helper()
	r.update(id, func(s *core.Session) []core.Event {
		switch kind {
		case core.EventToolCall:
			s.Tools = append(s.Tools, core.ToolState{CallID: c.CallID, Tool: c.Tool, Cmd: c.Cmd, Turn: s.Turn})
		case core.EventToolOutput:
			i := core.FindTool(s.Tools, c.CallID)
			s.Tools[i].Done, s.Tools[i].ExitCode = true, c.ExitCode
		}
		cc := c
		return []core.Event{{Kind: kind, Session: id, Turn: s.Turn, Call: &cc}}
	})
}

// TestDispatchProgress: a turn's tool calls are shown in one progress
// message, sent with the turn_complete lifetime and edited (paced, the
// bursts coalesced) as calls end; after the turn completes, a change still
// queued shows nothing, and the next turn's calls get a new message.
func TestDispatchProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fk := newFake(core.Capabilities{})
		st := openStore(t)
		out := newOutbox(fk, delivery.OutboxOptions{EditInterval: time.Second})
		t.Cleanup(out.Close)
		var mu sync.Mutex
		var sent []delivery.Sent
		d := delivery.NewDispatcher(st, delivery.NewRouter(fk), out, delivery.DispatcherOptions{
			OnSent: func(_ context.Context, s delivery.Sent) { mu.Lock(); sent = append(sent, s); mu.Unlock() }})
		t.Cleanup(d.StopTyping)
		r := &rig{t: t, store: st, fk: fk, out: out, d: d}
		id := r.newSession("tools", dm)
		start := time.Now()
		zero, two := 0, 2
		r.tool(id, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "shell", Cmd: "make"})
		r.settle()
		r.tool(id, core.EventToolOutput, core.ToolCall{CallID: "a", ExitCode: &zero})
		r.tool(id, core.EventToolCall, core.ToolCall{CallID: "b", Tool: "shell", Cmd: "make test"})
		r.settle()
		// Within the edit interval: this edit waits, and the turn ends
		// before it may run.
		r.tool(id, core.EventToolOutput, core.ToolCall{CallID: "b", ExitCode: &two})
		r.yield(id)
		r.settle()
		want := []string{
			`send "🔧 Tools: 0 of 1 done\n⏳ **shell** ` + "`make`" + ` — running" #1 at +0s`,
			`edit "🔧 Tools: 1 of 2 done\n✅ **shell** ` + "`make`" + ` — exit 0\n⏳ **shell** ` + "`make test`" + ` — running" #1 at +1s`,
		}
		if got := calls(fk, start, dm, "send", "edit"); len(got) != 3 || fmt.Sprint(got[:2]) != fmt.Sprint(want) || got[2] != `send "✅ Done" #2 at +1s` {
			t.Fatalf("calls\n%q, want\n%q and the turn-done message", got, want)
		}
		mu.Lock()
		if len(sent) < 1 || sent[0].Kind != core.KindProgress || sent[0].Lifetime != core.LifetimeTurnComplete || sent[0].Ref.ID != "1" {
			t.Fatalf("sent %+v", sent)
		}
		mu.Unlock()
		if b := r.binding(id); b.Progress.Ref.ID != "1" || b.Progress.Turn != 0 {
			t.Fatalf("binding progress %+v", b.Progress)
		}
		// The next turn's first call: a new progress message.
		r.tool(id, core.EventToolCall, core.ToolCall{CallID: "c", Tool: "grep"})
		r.settle()
		if got := messages(fk, dm, core.KindProgress); len(got) != 2 || got[1] != "🔧 Tools: 0 of 1 done\n⏳ **grep** — running" {
			t.Fatalf("progress messages %q", got)
		}
	})
}

// TestDispatchProgressMessageGone: a progress message deleted by someone
// while its turn runs is sent anew.
func TestDispatchProgressMessageGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, newFake(core.Capabilities{}), openStore(t), delivery.OutboxOptions{})
		id := r.newSession("gone", dm)
		r.tool(id, core.EventToolCall, core.ToolCall{CallID: "a", Tool: "shell"})
		r.settle()
		ref := r.binding(id).Progress.Ref
		if err := r.fk.Delete(context.Background(), ref); err != nil {
			t.Fatal(err)
		}
		zero := 0
		r.tool(id, core.EventToolOutput, core.ToolCall{CallID: "a", ExitCode: &zero})
		r.settle()
		got := messages(r.fk, dm, core.KindProgress)
		if len(got) != 1 || got[0] != "🔧 Tools: 1 of 1 done\n✅ **shell** — exit 0" || r.binding(id).Progress.Ref == ref {
			t.Fatalf("progress %q, ref %+v", got, r.binding(id).Progress.Ref)
		}
	})
}
