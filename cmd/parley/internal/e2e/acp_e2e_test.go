package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/cmd/parley/internal/serve"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// The story of an ACP agent parley runs (issue 26), for each agent of
// acpAgents: answers, approvals, cancel, a missing command, sessions
// sharing the agent's process.

// TestACPAnswers: a person's message is answered once; the next message
// continues the conversation (the model is sent the earlier turn); a long
// answer is streamed into one message, edited in place, and whole at the
// end.
func TestACPAnswers(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		st := newACPStack(t, ag, nil)
		topic := st.newTopic("work")

		st.model.Say(modeltest.Text("The answer is 42."))
		st.srv.SendText(st.forum, topic, ann, "What is the answer?")
		st.answeredOnce(topic, "The answer is 42.")

		st.model.Say(modeltest.Text("You asked for the answer."))
		st.srv.SendText(st.forum, topic, ann, "What did I ask?")
		st.answeredOnce(topic, "You asked for the answer.")
		last := st.model.sent(st.model.turns() - 1)
		for _, want := range []string{"What is the answer?", "The answer is 42.", "What did I ask?"} {
			if !strings.Contains(last, want) {
				t.Errorf("the second turn's request does not carry %q:\n%s", want, last)
			}
		}

		// The model streams the first half of a long answer and is held
		// there until the topic shows it; then it streams the rest.
		long := longAnswer(6000)
		cut := strings.Index(long[len(long)/2:], "\n") + len(long)/2 + 1
		release := make(chan struct{})
		first, rest := pieces(long[:cut], 400), pieces(long[cut:], 400)
		st.model.Say(modeltest.Chunks(0, first...), modeltest.Block{Chunks: rest, Wait: release})
		st.srv.SendText(st.forum, topic, ann, "Explain the retry loop.")
		lastOfFirst := strings.TrimSpace(long[strings.LastIndex(strings.TrimSpace(long[:cut]), "\n")+1 : cut])
		lastLine := strings.TrimSpace(long[strings.LastIndex(strings.TrimSpace(long), "\n")+1:])
		partial := st.showing(topic, lastOfFirst)
		if strings.Contains(partial.Text, lastLine) {
			t.Fatal("the answer was whole before the model was released")
		}
		close(release)
		var output telegramtest.Message
		st.await("the long answer whole", func() bool {
			for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
				if strings.TrimSpace(m.Markdown) == strings.TrimSpace(long) {
					output = m
					return true
				}
			}
			return false
		})
		if output.ID != partial.ID || output.Edits == 0 {
			t.Errorf("the whole answer is in message %d (%d edits), the streamed half was in %d: not streamed in place",
				output.ID, output.Edits, partial.ID)
		}
		if n := len(st.shown(topic, lastLine)); n != 1 {
			t.Errorf("the answer's last line is shown in %d messages, want one", n)
		}
	})
}

// pieces cuts s into pieces of n bytes (the last shorter).
func pieces(s string, n int) []string {
	var out []string
	for s != "" {
		k := min(len(s), n)
		out = append(out, s[:k])
		s = s[k:]
	}
	return out
}

// TestACPApprovals: a shell call the agent asks permission for is put to
// the session's people with buttons; a stranger's click decides nothing;
// Ann's Approve runs it (its output in the page's ToolGroup). Deny and
// continue leaves it unrun and the turn ends as the agent chooses, told
// as no error; the next turn gives the model the refusal. Deny and abort
// ends the turn without asking the model again.
func TestACPApprovals(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		st := newACPStack(t, ag, nil)
		topic := st.newTopic("work")

		st.model.Say(ag.shell("touch approved.txt && echo made it"))
		st.model.Say(modeltest.Text("Created approved.txt."))
		st.srv.SendText(st.forum, topic, ann, "Make a file.")
		question := st.question(topic, "touch approved.txt")
		var labels []string
		for _, row := range question.Buttons {
			labels = append(labels, row[0].Text)
		}
		if len(labels) < 3 || labels[0] != "Approve" || labels[1] != "Deny and continue" || labels[2] != "Deny and abort" {
			t.Fatalf("approval buttons %q", labels)
		}
		session := st.sessionID()
		q := st.srv.Click(st.forum, question.ID, stranger, question.Buttons[0][0].CallbackData)
		st.await("the stranger's click answered", func() bool { return len(st.srv.CallbackAnswers(q)) == 1 })
		if groups := getState(t, st.m.Addr(), session).toolGroups(); len(groups) != 1 || strings.Contains(groups[0], " by telegram ") {
			t.Fatalf("after the stranger's click the page shows %q", groups)
		}
		if m, _ := st.srv.Message(st.forum, question.ID); len(m.Buttons) == 0 {
			t.Fatal("the stranger's click withdrew the question")
		}
		st.srv.Click(st.forum, question.ID, ann, question.Buttons[0][0].CallbackData)
		st.answeredOnce(topic, "Created approved.txt.")
		if _, err := os.Stat(filepath.Join(st.workdir, "approved.txt")); err != nil {
			t.Fatalf("the approved command did not run: %v", err)
		}
		groups := getState(t, st.m.Addr(), session).toolGroups()
		if len(groups) != 1 || !strings.Contains(groups[0], `touch approved.txt && echo made it" exit 0 "made it`) ||
			!strings.Contains(groups[0], "approve (approve by telegram 42)") {
			t.Fatalf("the page shows tool groups %q", groups)
		}

		// Deny and continue.
		before := st.model.turns()
		st.model.Say(ag.shell("touch denied.txt"))
		st.srv.SendText(st.forum, topic, ann, "Make another.")
		deniedGroup := st.deny(topic, session, "denied.txt", 1, "deny_continue (deny_continue by telegram 42)")
		// The agent ends the turn on the denial without more text
		// (OpenCode asks its model nothing more; Codex's only reject
		// ends the turn): said plainly, as the agent's doing.
		ended := st.showing(topic, "⏹ "+ag.title+" ended the turn when a tool call was denied.")
		if strings.Contains(ended.Text, "⚠️") {
			t.Errorf("the denied turn's end is told as an error: %q", ended.Text)
		}
		st.model.Say(modeltest.Text("Understood, I did not create it."))
		st.srv.SendText(st.forum, topic, ann, "Did you?")
		st.answeredOnce(topic, "Understood, I did not create it.")
		// The model learns of the refusal: in the denied turn, where the
		// agent asks it again, else with the next.
		refused := false
		for i := before; i < st.model.turns(); i++ {
			if text, ok := st.model.lastResult(i); ok && strings.Contains(strings.ToLower(text), ag.refusal) {
				refused = true
			}
		}
		if !refused {
			t.Errorf("the model was never told of the refusal (%q); it was sent:\n%s", ag.refusal, st.model.sent(st.model.turns()-1))
		}

		// Deny and abort.
		before = st.model.turns()
		st.model.Say(ag.shell("touch aborted.txt"))
		st.model.Say(modeltest.Text("This must not be asked for."))
		st.srv.SendText(st.forum, topic, ann, "And a third.")
		abortedGroup := st.deny(topic, session, "aborted.txt", 2, "deny_abort (deny_abort by telegram 42)")
		if n := st.model.turns() - before; n != 1 {
			t.Fatalf("%d model requests after Deny and abort, want the one that asked", n)
		}
		st.idle()
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if strings.Contains(m.Text, "⚠️") || strings.Contains(m.Text, "This must not be asked for.") {
				t.Errorf("the topic shows %q", m.Text)
			}
		}

		// The page shows each denied call's command, as the question did.
		for _, g := range []struct{ group, command string }{{deniedGroup, "touch denied.txt"}, {abortedGroup, "touch aborted.txt"}} {
			if !strings.Contains(g.group, `"`+g.command+`"`) {
				t.Errorf("the page's ToolGroup of the denied call does not show its command %q: %q", g.command, g.group)
			}
		}
	})
}

// deny has Ann answer the question about `touch file` with the button
// of row (1 Deny and continue, 2 Deny and abort), waits until the turn is
// over with decision on the page's last ToolGroup, and checks that the
// command did not run. It returns that ToolGroup.
func (st *acpStack) deny(topic int, session, file string, row int, decision string) string {
	st.t.Helper()
	question := st.question(topic, "touch "+file)
	st.srv.Click(st.forum, question.ID, ann, question.Buttons[row][0].CallbackData)
	var group string
	st.await("the denied turn over", func() bool {
		groups := getState(st.t, st.m.Addr(), session).toolGroups()
		if len(groups) == 0 || !strings.Contains(groups[len(groups)-1], decision) || st.status(session) != core.StatusIdle {
			return false
		}
		group = groups[len(groups)-1]
		return true
	})
	if _, err := os.Stat(filepath.Join(st.workdir, file)); err == nil {
		st.t.Fatalf("the denied command ran: %s exists", file)
	}
	return group
}

// TestACPCancel: /cancel stops a turn mid-stream (the model is held after
// its first words until the test ends); the output keeps what was
// streamed and says it was cancelled; the next message is answered.
func TestACPCancel(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		st := newACPStack(t, ag, nil)
		topic := st.newTopic("work")
		hold := make(chan struct{})
		t.Cleanup(func() { close(hold) })
		st.model.Say(modeltest.Chunks(0, "wordA ", "wordB "), modeltest.Block{Chunks: []string{"THE-END"}, Wait: hold})
		st.srv.SendText(st.forum, topic, ann, "Count slowly.")
		st.showing(topic, "wordA wordB")
		st.srv.SendText(st.forum, topic, ann, "/cancel")
		m := st.showing(topic, "Cancelled")
		if !strings.Contains(m.Text, "wordA wordB") {
			t.Errorf("the cancelled output lost what was streamed: %q", m.Text)
		}
		st.model.Say(modeltest.Text("Fresh start."))
		st.srv.SendText(st.forum, topic, ann, "Go on.")
		st.answeredOnce(topic, "Fresh start.")
		if n := len(st.shown(topic, "THE-END")); n != 0 {
			t.Fatal("the cancelled stream went on")
		}
		for _, m := range botMessages(st.srv.Messages(st.forum, topic)) {
			if strings.Contains(m.Text, "⚠️") {
				t.Errorf("people were told of a failure: %q", m.Text)
			}
		}
	})
}

// TestACPMissingCommand: an agent command that does not exist gives the
// person one notice in the topic with the cause and the fix (and keeps
// the message for the next try).
func TestACPMissingCommand(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		missing := filepath.Join(t.TempDir(), "no-such-"+ag.name)
		st := newACPStack(t, ag, func(c *config.Config) { c.Agent.Command = missing })
		topic := st.newTopic("work")
		st.srv.SendText(st.forum, topic, ann, "Hello?")
		notice := st.showing(topic, "no-such-"+ag.name)
		for _, want := range []string{"not installed", serve.InstallHints[ag.kind], "PARLEY_AGENT_COMMAND"} {
			if !strings.Contains(notice.Text, want) {
				t.Errorf("the notice does not say %q: %q", want, notice.Text)
			}
		}
		st.idle()
		if n := len(st.shown(topic, "no-such-"+ag.name)); n != 1 {
			t.Errorf("the notice is shown %d times, want once", n)
		}
	})
}

// TestACPMissingCommandNamed: the notice of a named agent's missing
// command names the key to set: its section and variable.
func TestACPMissingCommandNamed(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		missing := filepath.Join(t.TempDir(), "no-such-helper")
		st := newACPStack(t, ag, func(c *config.Config) {
			helper := c.Agent
			helper.Command, helper.MaxRunning = missing, 0
			c.Agents = map[string]*config.Agent{"helper": &helper}
		})
		topic := st.newTopic("--agent helper Other work")
		st.srv.SendText(st.forum, topic, ann, "Hello, helper?")
		notice := st.showing(topic, "no-such-helper")
		if !strings.Contains(notice.Text, serve.InstallHints[ag.kind]) {
			t.Errorf("the notice does not say how to install it: %q", notice.Text)
		}
		if !strings.Contains(notice.Text, "[agents.helper] command (PARLEY_AGENTS_HELPER_COMMAND)") {
			t.Errorf("the notice of a named agent does not say its section and variable: %q", notice.Text)
		}
	})
}
