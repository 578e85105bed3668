package e2e

import (
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// otherACPAgent is the agent of acpAgents after ag, the one a session of
// ag's is switched to.
func otherACPAgent(ag acpAgent) acpAgent {
	for i, a := range acpAgents {
		if a.name == ag.name {
			return acpAgents[(i+1)%len(acpAgents)]
		}
	}
	panic("no agent " + ag.name)
}

// TestACPSwitchAgent: a session of an ACP agent is switched with /agent
// NAME to another ACP agent ([agents.NAME], with a fake model of its own);
// people are told the new agent starts its own conversation, the next
// message goes to it without the earlier ones, and /status names it;
// switched back, the first agent continues its own conversation.
func TestACPSwitchAgent(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		other := otherACPAgent(ag)
		otherSetup, otherModel := other.setup(t, "")
		st := newACPStack(t, ag, func(c *config.Config) {
			o := acpSection(other, otherSetup)
			o.MaxRunning = 0 // [agent]'s alone
			c.Agents = map[string]*config.Agent{other.name: &o}
		})
		topic := st.newTopic("work")
		st.model.Say(modeltest.Text("Default agent here."))
		st.srv.SendText(st.forum, topic, ann, "Remember the word apricot.")
		st.answeredOnce(topic, "Default agent here.")

		st.srv.SendText(st.forum, topic, ann, "/agent")
		list := st.showing(topic, "Agents (/agent NAME")
		for _, want := range []string{"default — " + ag.title + " (this session's)", other.name + " — " + other.title} {
			if !strings.Contains(list.Text, want) {
				t.Errorf("the list %q does not say %q", list.Text, want)
			}
		}
		st.srv.SendText(st.forum, topic, ann, "/agent "+other.name)
		st.showing(topic, "This session now runs with "+other.name+" ("+other.title+"). It starts its own conversation")
		otherModel.Say(modeltest.Text("Other agent here, new to this."))
		st.srv.SendText(st.forum, topic, ann, "What was the word?")
		st.answeredOnce(topic, "Other agent here, new to this.")
		if n := otherModel.turns(); n != 1 {
			t.Fatalf("the other agent's model got %d turns", n)
		}
		if sent := otherModel.sent(0); strings.Contains(sent, "apricot") || !strings.Contains(sent, "What was the word?") {
			t.Errorf("the other agent was sent %q: it starts its own conversation", sent)
		}
		if n := st.model.turns(); n != 1 {
			t.Errorf("the default agent's model got %d turns, want the first only", n)
		}
		st.srv.SendText(st.forum, topic, ann, "/status")
		st.showing(topic, "agent "+other.name+" ("+other.title+")")

		st.srv.SendText(st.forum, topic, ann, "/agent default")
		st.showing(topic, "This session now runs with default ("+ag.title+")")
		st.model.Say(modeltest.Text("The word was apricot."))
		st.srv.SendText(st.forum, topic, ann, "And now?")
		st.answeredOnce(topic, "The word was apricot.")
		if sent := st.model.sent(st.model.turns() - 1); !strings.Contains(sent, "apricot") {
			t.Errorf("the default agent was sent %q, want its earlier turn", sent)
		}
	})
}
