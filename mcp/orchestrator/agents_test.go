package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent"
)

// fakeACP is an agent that names its conversations itself, as an ACP
// agent's session/new answers a sessionId, played by fakeClaude's
// processes: a new conversation exists once Start returned, and one it
// does not have (forget) cannot be resumed (agent.ErrNoConversation).
type fakeACP struct {
	fc *fakeClaude

	mu     sync.Mutex
	n      int
	starts []agent.StartRequest
}

var _ agent.Driver = (*fakeACP)(nil)

func newFakeACP(model func(t *fakeTurn)) *fakeACP { return &fakeACP{fc: newFakeClaude(model)} }

func (f *fakeACP) Start(ctx context.Context, req agent.StartRequest) (agent.Conversation, error) {
	f.mu.Lock()
	f.starts = append(f.starts, req)
	id := req.Conversation
	if id == "" {
		f.n++
		id = fmt.Sprintf("acp-%d", f.n)
	}
	f.mu.Unlock()
	f.fc.mu.Lock()
	_, exists := f.fc.turns[id]
	if req.Conversation == "" {
		f.fc.turns[id], exists = []string{}, true
	}
	f.fc.mu.Unlock()
	if !exists {
		return nil, agent.ErrNoConversation
	}
	return f.fc.start(ctx, req.Session, id, true)
}

// forget makes the agent lose conversation id, as an agent restarted
// without its sessions does.
func (f *fakeACP) forget(id string) {
	f.fc.mu.Lock()
	delete(f.fc.turns, id)
	f.fc.mu.Unlock()
}

func (f *fakeACP) startsOf() []agent.StartRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

// acpAgent is the agents of an orchestrator whose default is f.
func acpAgent(f *fakeACP) map[string]Agent {
	return map[string]Agent{"": {Driver: f, Title: "OpenCode", Kind: "opencode", AskPermissions: true}}
}

func readState(t *testing.T, st *stack, id core.SessionID) state {
	t.Helper()
	var s state
	if err := json.Unmarshal([]byte(st.state(id)), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAgentEventsShown: what an ACP agent reports beyond Claude Code's
// events. Its thoughts are never shown; its plan is a checklist at the top
// of the output, replaced as it changes and kept in the final output; a
// tool call the agent tells more of later shows the new command in the
// call's ToolGroup and progress line.
func TestAgentEventsShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fa := newFakeACP(func(ft *fakeTurn) {
			ft.emit(agent.Thought{Text: "secret reasoning"})
			ft.emit(agent.Plan{Entries: []agent.PlanEntry{{Content: "look", Status: "pending"}, {Content: "fix", Status: "pending"}}})
			ft.Pause(200 * time.Millisecond)
			ft.emit(agent.Plan{Entries: []agent.PlanEntry{{Content: "look", Status: "completed"}, {Content: "fix\nit", Status: "in_progress"},
				{Content: "test", Status: "pending"}}})
			ft.emit(agent.ToolUse{ID: "t1", Name: "bash", Kind: "execute"})
			ft.Pause(200 * time.Millisecond)
			ft.emit(agent.ToolUpdate{ID: "t1", Show: "ls -la", Status: "in_progress"})
			zero := 0
			ft.emit(agent.ToolResult{ToolUseID: "t1", Stdout: "files", ExitCode: &zero})
			ft.emit(agent.Thought{Text: "more secret reasoning"})
			ft.Say("Done.")
		})
		startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
		st.say(id, ann, "fix it")
		settle(2 * time.Second)

		texts, finals := st.outputs(id)
		for _, txt := range texts {
			if strings.Contains(txt, "secret") {
				t.Fatalf("a thought was shown: %q", txt)
			}
		}
		if texts[0] != "**Plan**\n- ⬜ look\n- ⬜ fix" {
			t.Fatalf("the first output %q, want the plan at once", texts[0])
		}
		want := "**Plan**\n- ✅ look\n- ▶️ fix it\n- ⬜ test\n\nDone."
		if !slices.Equal(finals, []string{want}) {
			t.Fatalf("final outputs %q (all %q)", finals, texts)
		}
		var cmds []string
		for _, e := range st.events(id, core.EventToolCall) {
			cmds = append(cmds, e.Call.Cmd)
		}
		if !slices.Equal(cmds, []string{"", "ls -la"}) {
			t.Fatalf("the call showed %q", cmds)
		}
		if sess := st.session(id); sess.Tools[0].Cmd != "ls -la" || !sess.Tools[0].Done {
			t.Fatalf("tools %+v", sess.Tools)
		}
	})
}

// TestStopReasonsTold: a turn that ends other than by the agent answering
// says why under what was streamed, as the agent's or the model's doing.
func TestStopReasonsTold(t *testing.T) {
	for _, tc := range []struct {
		r    agent.Result
		want string
	}{
		{agent.Result{Stop: agent.StopCancelled}, "partial\n\n⏹ Cancelled."},
		{agent.Result{Stop: agent.StopRefusal}, "partial\n\n⏹ The model refused to go on with this request."},
		{agent.Result{Stop: agent.StopMaxTokens}, "partial\n\n⏹ Stopped: the answer reached the model's output limit (max_tokens)."},
		{agent.Result{Stop: agent.StopMaxTurns}, "partial\n\n⏹ Stopped: the agent reached its limit of model requests for one turn."},
		{agent.Result{Stop: agent.StopError, Text: "API Error: 500"}, "partial\n\n⚠️ API Error: 500"},
		{agent.Result{Stop: agent.StopEndTurn}, "partial"},
	} {
		t.Run(string(tc.r.Stop), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := newStack(t, t.TempDir())
				id := st.create()
				fa := newFakeACP(func(ft *fakeTurn) {
					ft.Say("partial")
					ft.end(tc.r)
				})
				startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
				st.say(id, ann, "go")
				settle(time.Second)
				if _, finals := st.outputs(id); !slices.Equal(finals, []string{tc.want}) {
					t.Fatalf("final %q, want %q", finals, tc.want)
				}
				if n := len(st.events(id, core.EventTurnComplete)); n != 1 {
					t.Fatalf("%d turns completed", n)
				}
				if a := st.assistant(id); len(a) != 0 {
					t.Fatalf("posted %q: nothing is parley's error", a)
				}
			})
		})
	}
	t.Run("error without text", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := newStack(t, t.TempDir())
			id := st.create()
			fa := newFakeACP(func(ft *fakeTurn) { ft.end(agent.Result{Stop: agent.StopError, Errors: []string{"quota exceeded"}}) })
			startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
			st.say(id, ann, "go")
			settle(time.Second)
			if _, finals := st.outputs(id); !slices.Equal(finals, []string{"⚠️ The turn ended with an error (quota exceeded)."}) {
				t.Fatalf("final %q", finals)
			}
		})
	})
}

// TestUnnamedConversation: the id an agent gave its conversation is saved
// once Start returned and resumed by the next start (after a restart of
// parley); an agent that lost the conversation gets a new one, and people
// are told once that it starts afresh.
func TestUnnamedConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fa := newFakeACP(nil)
		r := startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
		st.say(id, ann, "one")
		settle(time.Second)
		s := readState(t, st, id)
		if s.Conversation != "acp-1" || s.Kind != "opencode" || !s.Started {
			t.Fatalf("state %+v", s)
		}
		r.stop()
		r = startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
		st.say(id, ann, "two")
		settle(time.Second)
		starts := fa.startsOf()
		if len(starts) != 2 || starts[0].Conversation != "" || starts[0].Resume || starts[1].Conversation != "acp-1" || !starts[1].Resume {
			t.Fatalf("starts %+v", starts)
		}
		if got := fa.fc.transcript("acp-1"); !slices.Equal(got, []string{"one", "two"}) {
			t.Fatalf("conversation %q", got)
		}

		r.stop()
		fa.forget("acp-1")
		startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
		st.say(id, ann, "three")
		settle(time.Second)
		starts = fa.startsOf()[2:]
		if len(starts) != 2 || starts[0].Conversation != "acp-1" || !starts[0].Resume || starts[1].Conversation != "" || starts[1].Resume {
			t.Fatalf("starts after the agent lost it %+v", starts)
		}
		if s := readState(t, st, id); s.Conversation != "acp-2" {
			t.Fatalf("state %+v", s)
		}
		if a := st.assistant(id); len(a) != 1 || !strings.Contains(a[0], "OpenCode could not continue this session's conversation") {
			t.Fatalf("posted %q", a)
		}
		if _, finals := st.outputs(id); finals[len(finals)-1] != "echo: three" {
			t.Fatalf("finals %q", finals)
		}
	})
}

// TestAgentSwitch: a session runs with the default agent until a person
// switches it: the messages after the switch go to the new agent, which
// starts its own conversation; the old one is stopped and kept, and
// resumed when the session switches back. A session created with an agent
// runs with it from its first message.
func TestAgentSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(nil)
		fa := newFakeACP(func(ft *fakeTurn) { ft.Say("codex: " + ft.Text) })
		agents := claudeAgent(fc, true)
		agents["codex"] = Agent{Driver: fa, Title: "Codex", Kind: "codex", AskPermissions: true}
		startOrchestrator(t, st, nil, func(o *Options) { o.Agents = agents })
		st.say(id, ann, "one")
		settle(time.Second)
		st.handle(core.Command{Kind: core.SetAgent, Session: id, Origin: platform, Actor: ann, Agent: "codex"})
		st.say(id, ann, "two")
		settle(time.Second)
		if got := fc.sent(string(id)); !slices.Equal(got, []string{"one"}) {
			t.Fatalf("Claude Code was handed %q", got)
		}
		if got := fa.fc.sent(string(id)); !slices.Equal(got, []string{"two"}) {
			t.Fatalf("codex was handed %q", got)
		}
		if p := fc.procsOf(string(id)); !p[0].wasStopped() {
			t.Fatal("the old agent's process runs on")
		}
		s := readState(t, st, id)
		claudeConv := s.Conversation
		if s.Agent != "codex" || s.Agents["codex"].Conversation != "acp-1" || len(claudeConv) != 36 {
			t.Fatalf("state %+v", s)
		}
		if _, finals := st.outputs(id); finals[len(finals)-1] != "codex: two" {
			t.Fatalf("finals %q", finals)
		}

		st.handle(core.Command{Kind: core.SetAgent, Session: id, Origin: platform, Actor: ann, Agent: "default"})
		st.say(id, ann, "three")
		settle(time.Second)
		starts := fc.startsOf(string(id))
		if last := starts[len(starts)-1]; !last.resume || last.conversation != claudeConv {
			t.Fatalf("switched back, Claude Code started %+v, want its conversation resumed", last)
		}
		if got := fc.transcript(claudeConv); !slices.Equal(got, []string{"one", "three"}) {
			t.Fatalf("Claude Code's conversation %q", got)
		}

		made := st.handle(core.Command{Kind: core.CreateSession, Origin: platform, Actor: ann, Agent: "codex"}).Session
		st.say(made, ann, "hello")
		settle(time.Second)
		if got := fa.fc.sent(string(made)); !slices.Equal(got, []string{"hello"}) {
			t.Fatalf("a session made with codex: codex was handed %q", got)
		}
		if got := fc.sent(string(made)); len(got) != 0 {
			t.Fatalf("a session made with codex: Claude Code was handed %q", got)
		}
	})
}

// TestSwitchWaitsForTheTurn: a switch while a turn runs lets the turn end
// with its agent; what was written after it goes to the new one.
func TestSwitchWaitsForTheTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		fc := newFakeClaude(func(ft *fakeTurn) {
			ft.Pause(time.Second)
			ft.Say("claude: " + ft.Text)
		})
		fa := newFakeACP(func(ft *fakeTurn) { ft.Say("codex: " + ft.Text) })
		agents := claudeAgent(fc, true)
		agents["codex"] = Agent{Driver: fa, Title: "Codex", Kind: "codex"}
		startOrchestrator(t, st, nil, func(o *Options) { o.Agents = agents })
		st.say(id, ann, "long one")
		settle(100 * time.Millisecond)
		st.handle(core.Command{Kind: core.SetAgent, Session: id, Origin: platform, Actor: ann, Agent: "codex"})
		st.say(id, ann, "next")
		settle(3 * time.Second)
		if _, finals := st.outputs(id); !slices.Equal(finals, []string{"claude: long one", "codex: next"}) {
			t.Fatalf("finals %q", finals)
		}
	})
}

// TestUnknownAgent: a session whose agent is not configured (any more)
// tells people, once for their message (a restart says nothing more),
// naming the way out, and keeps the message.
func TestUnknownAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		if _, _, err := st.store.UpdateSession(context.Background(), id, func(s *core.Session) error {
			s.Agent = "gone"
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		fc := newFakeClaude(nil)
		r := startOrchestrator(t, st, fc, nil)
		st.say(id, ann, "hello")
		settle(time.Second)
		r.stop()
		startOrchestrator(t, st, fc, nil)
		settle(time.Second)
		a := st.assistant(id)
		if len(a) != 1 || !strings.Contains(a[0], `this session's agent "gone" is not configured`) || !strings.Contains(a[0], "/agent NAME") {
			t.Fatalf("posted %q", a)
		}
		if got := fc.sent(string(id)); len(got) != 0 {
			t.Fatalf("the default agent was handed %q", got)
		}
	})
}

// TestAlwaysAllowDecision: a permission prompt the agent offers to
// remember gets the fourth option; choosing it allows the call with
// Always.
func TestAlwaysAllowDecision(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newStack(t, t.TempDir())
		id := st.create()
		decided := make(chan agent.Decision, 1)
		fa := newFakeACP(func(ft *fakeTurn) {
			decided <- ft.BashAlways("b1", "npm test")
			ft.Say("tested")
		})
		startOrchestrator(t, st, nil, func(o *Options) { o.Agents = acpAgent(fa) })
		st.say(id, ann, "test it")
		settle(time.Second)
		if q := st.session(id).Questions; len(q) != 1 || len(q[0].Options) != 4 || q[0].Options[3] != "Always allow" {
			t.Fatalf("questions %+v", q)
		}
		st.decide(id, 4)
		settle(time.Second)
		if d := <-decided; !d.Allow || !d.Always {
			t.Fatalf("decision %+v", d)
		}
		evs := st.events(id, core.EventToolApproval)
		if len(evs) != 1 || evs[0].Call.Decision != core.DecisionApproveAlways {
			t.Fatalf("approvals %+v", evs)
		}
	})
}
