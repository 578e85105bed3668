//go:build linux

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
	"github.com/parley-chat/parley/cmd/parley/internal/serve/servetest"
	"github.com/parley-chat/parley/mcp/agent/agenttest"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// Crash safety of the ACP agents parley runs: `parley serve` (a child
// process, parleyBin) runs the real agent against the fake model API in
// the test process, and is killed with SIGKILL in the middle of a turn.

// acpConfigFile writes parley's configuration file with ag's [agent]
// section (its env holds commas, which PARLEY_AGENT_ENV cannot carry).
func acpConfigFile(t *testing.T, ag acpAgent, setup agenttest.Agent) string {
	t.Helper()
	a := acpSection(ag, setup)
	path := filepath.Join(t.TempDir(), "parley.toml")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := toml.NewEncoder(f).Encode(map[string]any{"agent": map[string]any{
		"kind": a.Kind, "command": a.Command, "args": a.Args, "workdir": a.Workdir,
		"permissions": a.Permissions, "env": a.Env,
	}}); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestACPKilledMidTurn: the agent streams its answer and is held in the
// middle of it; once part of it is visible in the topic (and the output
// message edited, so parley has recorded it), parley is killed with
// SIGKILL and restarted on the same data directory. The person's message
// is answered once, in the killed turn's output message, which no longer
// shows the partial answer; the model is asked the question again;
// nothing the killed run's agent process started runs on; nothing is
// posted twice and no failure is told; the next message continues the
// conversation.
func TestACPKilledMidTurn(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		setup, model := ag.setup(t, "")
		srv := telegramtest.NewServer(t, telegramtest.Options{RichMessages: true})
		forum := srv.NewForum("Team")
		dir, listen := t.TempDir(), freeAddr(t)
		env := []string{
			"PARLEY_TELEGRAM_TOKEN=" + srv.Token, "PARLEY_TELEGRAM_API_URL=" + srv.URL,
			"PARLEY_TELEGRAM_CHAT_ID=" + strconv.FormatInt(forum, 10),
			"PARLEY_TELEGRAM_ALLOWED_USERS=" + strconv.FormatInt(ann.ID, 10),
			"PARLEY_LOG_FORMAT=json", "PARLEY_LOG_LEVEL=debug",
			"PARLEY_CONFIG=" + acpConfigFile(t, ag, setup),
		}
		d := startDaemon(t, dir, listen, env...)
		st := &ccStack{tgStack: &tgStack{stack: stackOf(t, nil), srv: srv, forum: forum}, workdir: setup.WorkDir}
		topic := st.newTopic("work")
		t.Cleanup(func() {
			if t.Failed() {
				for _, m := range botMessages(srv.Messages(forum, topic)) {
					t.Logf("topic message %d (%d edits): %q", m.ID, m.Edits, m.Text)
				}
				for i := range model.turns() {
					t.Logf("model request %d was sent:\n%s", i, model.sent(i))
				}
			}
		})

		// The model streams the start of its answer, is held until the
		// topic shows it, streams a little more, and is held again until
		// the test ends: parley is killed there.
		const question = "Why is the build slow?"
		more, hold := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(hold) })
		model.Say(modeltest.Text("The build is slow"),
			modeltest.Block{Chunks: []string{" because every package"}, Wait: more},
			modeltest.Block{Chunks: []string{" KILLED-RUN-END"}, Wait: hold})
		srv.SendText(forum, topic, ann, question)
		output := st.showing(topic, "The build is slow")
		close(more)
		st.await("the streamed answer edited", func() bool {
			m, _ := srv.Message(forum, output.ID)
			return m.Edits > 0 && strings.Contains(m.Text, "because every package")
		})

		rec := acpPidfile(t, dir)
		var left []procID
		servetest.PollUntil(t, 30*time.Second, "the agent's process", func() bool {
			left = markedProcs(rec.Marker)
			return hasPID(left, rec.PID)
		}, nil)
		requestsBefore := model.turns()
		d.kill()
		t.Logf("killed parley mid-turn; its agent's processes: %v; still running after the kill: %v", left, running(left))

		const answer = "The build is slow because of the race detector. RESTARTED-RUN-END"
		model.Say(modeltest.Chunks(0, "The build is slow", " because of the race detector.", " RESTARTED-RUN-END"))
		startDaemon(t, dir, listen, env...)
		if m := st.answeredOnce(topic, answer); m.ID != output.ID {
			t.Errorf("the answer is in message %d, not in the killed turn's output message %d", m.ID, output.ID)
		}
		if n := len(st.shown(topic, "because every package")); n != 0 {
			t.Errorf("the killed turn's partial answer is still shown in %d messages", n)
		}
		if still := running(left); len(still) > 0 {
			t.Errorf("processes of the killed run's agent still run after the restart: %v", still)
		}
		if model.turns() <= requestsBefore {
			t.Fatal("the restarted parley answered without asking the model")
		}
		again := model.sent(requestsBefore)
		if !strings.Contains(again, question) {
			t.Errorf("the first model request after the restart does not carry the question:\n%s", again)
		}
		t.Logf("the model was sent the question %d times after the restart", strings.Count(again, question))

		const second = "And how do I make it faster?"
		model.Say(modeltest.Text("Run only the test you changed. SECOND-END"))
		srv.SendText(forum, topic, ann, second)
		st.answeredOnce(topic, "Run only the test you changed. SECOND-END")
		seen := model.sent(model.turns() - 1)
		for _, want := range []string{question, "RESTARTED-RUN-END", second} {
			if !strings.Contains(seen, want) {
				t.Errorf("the second turn's request does not carry %q:\n%s", want, seen)
			}
		}

		postedOnceNoFailure(t, botMessages(srv.Messages(forum, topic)))
	})
}
