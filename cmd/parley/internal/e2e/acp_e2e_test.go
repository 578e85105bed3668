package e2e

import (
	"strings"
	"testing"

	"github.com/parley-chat/parley/adapters/telegram/telegramtest"
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
