package e2e

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// The Agent Client Protocol agents parley runs, end to end: parley serve
// with [agent] kind = "opencode" or "codex" runs the real agent (installed
// by make test, set up offline by agenttest) against a fake model API of
// package modeltest scripted per test; people write in a Telegram topic
// (telegramtest). The story is written once and run for each agent of
// acpAgents.

// acpAgent is one real ACP agent the story runs with: how to set it up
// against a fake model of its own, and how its model calls a tool.
type acpAgent struct {
	// name is the subtest's name and the title people read.
	name, title string
	// kind is its [agent] kind.
	kind string
	// setup makes the fake model and sets the agent up against it, in
	// workdir ("" makes one).
	setup func(t *testing.T, workdir string) (agenttest.Agent, acpModel)
	// refusal is what the agent tells its model of a shell call people
	// denied, in lower case.
	refusal string
	// shell is the model's call of the agent's shell tool.
	shell func(command string) modeltest.Block
	// parleyTool is the model's call of tool (its MCP name, with dots) of
	// parley's own MCP server, which parley names "parley" in
	// session/new.
	parleyTool func(tool string, input any) modeltest.Block
}

// acpAgents are the ACP agents the story runs with.
var acpAgents = []acpAgent{
	{
		name: "opencode", title: "OpenCode", kind: config.AgentOpenCode,
		setup: func(t *testing.T, workdir string) (agenttest.Agent, acpModel) {
			api := modeltest.NewMessages(t)
			return agenttest.OpenCode(t, api, agenttest.OpenCodeConfig{WorkDir: workdir, AskBash: true}), messagesModel{api}
		},
		refusal: "rejected permission",
		shell:   func(command string) modeltest.Block { return agenttest.OpenCodeBash(command, "Run it") },
		parleyTool: func(tool string, input any) modeltest.Block {
			return modeltest.Tool(agenttest.OpenCodeMCPTool("parley", tool), input)
		},
	},
	{
		name: "codex", title: "Codex", kind: config.AgentCodex,
		setup: func(t *testing.T, workdir string) (agenttest.Agent, acpModel) {
			api := modeltest.NewResponses(t)
			return agenttest.Codex(t, api, agenttest.CodexConfig{WorkDir: workdir}), responsesModel{api}
		},
		refusal: "aborted",
		shell:   agenttest.CodexShell,
		parleyTool: func(tool string, input any) modeltest.Block {
			return agenttest.CodexMCPTool("parley", tool, input)
		},
	},
}

// realAgentStories bounds the ACP stories running at once. Each starts
// real agent processes (OpenCode: ~400 MiB and seconds of CPU to answer
// initialize); under make test, with other packages beside them on 2
// cores, eight at once made OpenCode's first answer take more than a
// minute. Two at a time keep both cores busy and each story's agent as
// fast as the others let it be.
var realAgentStories = make(chan struct{}, 2)

// forEachACPAgent runs story as a parallel subtest for each agent, at
// most cap(realAgentStories) stories at once.
func forEachACPAgent(t *testing.T, story func(t *testing.T, ag acpAgent)) {
	t.Parallel()
	for _, ag := range acpAgents {
		t.Run(ag.name, func(t *testing.T) {
			t.Parallel()
			realAgentStories <- struct{}{}
			defer func() { <-realAgentStories }()
			story(t, ag)
		})
	}
}

// acpModel is what the story needs of a fake model API, whichever its
// wire format.
type acpModel interface {
	Say(blocks ...modeltest.Block)
	Script(replies ...modeltest.Reply)
	// turns is the number of requests of the agent's main loop so far.
	turns() int
	// sent is everything request i (0-based) of the main loop gave the
	// model as text: the users' and the model's messages and the tools'
	// results, one a line.
	sent(i int) string
	// lastResult is the last tool result request i gave the model.
	lastResult(i int) (text string, ok bool)
}

// messagesModel is the Anthropic Messages fake (OpenCode's).
type messagesModel struct{ *modeltest.Messages }

func (m messagesModel) turns() int { return len(m.ModelRequests()) }

func (m messagesModel) sent(i int) string {
	r := m.ModelRequests()[i]
	return strings.Join(append(r.Texts("user"), r.Texts("assistant")...), "\n")
}

func (m messagesModel) lastResult(i int) (string, bool) {
	rs := m.ModelRequests()[i].ToolResults()
	if len(rs) == 0 {
		return "", false
	}
	return rs[len(rs)-1].Text, true
}

// responsesModel is the OpenAI Responses fake (Codex's).
type responsesModel struct{ *modeltest.Responses }

func (m responsesModel) turns() int { return len(m.ModelRequests()) }

func (m responsesModel) sent(i int) string {
	r := m.ModelRequests()[i]
	parts := append(r.Texts("user"), r.Texts("assistant")...)
	for _, o := range r.Outputs() {
		parts = append(parts, o.Output)
	}
	return strings.Join(parts, "\n")
}

func (m responsesModel) lastResult(i int) (string, bool) {
	outs := m.ModelRequests()[i].Outputs()
	if len(outs) == 0 {
		return "", false
	}
	return outs[len(outs)-1].Output, true
}

// acpStack is a Telegram stack whose agent is a real ACP agent run by
// parley.
type acpStack struct {
	*ccStack
	ag    acpAgent
	model acpModel
	setup agenttest.Agent
}

// acpSection is the [agent] section running ag as set up by setup.
func acpSection(ag acpAgent, setup agenttest.Agent) config.Agent {
	return config.Agent{Kind: ag.kind, Command: setup.Command[0], Args: setup.Command[1:], Workdir: setup.WorkDir,
		Permissions: config.PermissionsAsk, MaxRunning: 4, Env: setup.Env}
}

// newACPStack starts parley with ag as its [agent]; configure may change
// the configuration before the start.
func newACPStack(t *testing.T, ag acpAgent, configure func(*config.Config)) *acpStack {
	t.Helper()
	setup, model := ag.setup(t, "")
	st := newTGStackStopped(t, telegramtest.Options{RichMessages: true})
	st.noAgent = true
	if os.Getenv("PARLEY_TEST_LOG") != "" {
		st.logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else {
		st.captureLog(slog.LevelInfo)
	}
	st.cfg.Agent = acpSection(ag, setup)
	if configure != nil {
		configure(&st.cfg)
	}
	st.start()
	as := &acpStack{ccStack: &ccStack{tgStack: st, workdir: setup.WorkDir}, ag: ag, model: model, setup: setup}
	t.Cleanup(func() {
		if t.Failed() {
			as.report()
		}
	})
	return as
}

// report logs, for a failed test, what each session's topic and page
// show and what the model was sent.
func (st *acpStack) report() {
	ss, err := st.m.Daemon().Store.Sessions(context.Background())
	if err != nil {
		st.t.Log(err)
	}
	for _, s := range ss {
		topic, _ := strconv.Atoi(s.Bindings["telegram"].Place.Thread)
		st.t.Logf("session %s (agent %q):\n%s", s.ID, s.Agent, st.explain(string(s.ID), topic))
		if st.cfg.HTTP.Token == "" { // getState has no token
			st.t.Logf("its tool groups: %q", getState(st.t, st.m.Addr(), string(s.ID)).toolGroups())
		}
	}
	for i := range st.model.turns() {
		st.t.Logf("model request %d was sent:\n%s", i, st.model.sent(i))
		if r, ok := st.model.(responsesModel); ok && i == 0 {
			st.t.Logf("tools: %q", r.ModelRequests()[0].Tools)
		}
	}
}
