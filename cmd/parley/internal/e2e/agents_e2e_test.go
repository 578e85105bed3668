package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// Several agents, chosen per session, through parley serve and Telegram.
// Both are Claude Code here, each with its own fake Messages API, so that
// the API a turn reaches says which agent answered (a switch between ACP
// agents: acp_agents_test.go).

// twoAgents is a Telegram stack running Claude Code as the default agent
// (API main) and as the agent "helper" (API helper).
type twoAgents struct {
	*ccStack
	helper *claudetest.API
}

func newTwoAgents(t *testing.T) *twoAgents {
	t.Helper()
	helper := claudetest.NewAPI(t)
	var st *twoAgents
	cc := newCCStackConfig(t, func(c *config.Config) {
		h := c.Agent
		h.Env = claudetest.Env(t, helper.URL)
		h.MaxRunning = 0 // [agent]'s alone
		c.Agents = map[string]*config.Agent{"helper": &h}
	})
	st = &twoAgents{ccStack: cc, helper: helper}
	return st
}

// session is the session bound to topic, once there is one.
func (st *twoAgents) session(topic int) core.Session {
	st.t.Helper()
	var found core.Session
	st.await("the topic's session", func() bool {
		for _, s := range st.sessions() {
			if b, ok := s.Bindings["telegram"]; ok && b.Place.Thread == strconv.Itoa(topic) {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// TestNewWithAgent: "/new --agent helper Fix the build" makes a topic
// whose session runs with helper, which answers it; a name parley does
// not run is refused with the names, and makes no topic.
func TestNewWithAgent(t *testing.T) {
	t.Parallel()
	st := newTwoAgents(t)
	topic := st.newTopic("--agent helper Fix the build")
	if s := st.session(topic); s.Agent != "helper" || s.Title != "Fix the build" {
		t.Fatalf("session %+v", s)
	}
	st.helper.Say(claudetest.Text("Helper here."))
	st.srv.SendText(st.forum, topic, ann, "Who are you?")
	st.answeredOnce(topic, "Helper here.")
	if n := len(st.api.ModelRequests()); n != 0 {
		t.Errorf("the default agent's API got %d turns", n)
	}

	before := len(st.srv.Topics(st.forum))
	st.srv.SendText(st.forum, 0, ann, "/new --agent nope Other work")
	notice := st.showing(0, `no agent "nope"`)
	if !strings.Contains(notice.Text, "the agents are: default, helper") {
		t.Errorf("the refusal %q does not name the agents", notice.Text)
	}
	if n := len(st.srv.Topics(st.forum)); n != before {
		t.Errorf("a refused /new made a topic (%d topics, were %d)", n, before)
	}
}

// TestSwitchAgent: /agent lists the agents; /agent NAME switches the
// session, people are told the new agent starts its own conversation, the
// next message goes to it without the earlier ones, and /status names it.
func TestSwitchAgent(t *testing.T) {
	t.Parallel()
	st := newTwoAgents(t)
	topic := st.newTopic("work")
	st.api.Say(claudetest.Text("Default agent here."))
	st.srv.SendText(st.forum, topic, ann, "Remember the word apricot.")
	st.answeredOnce(topic, "Default agent here.")

	st.srv.SendText(st.forum, topic, ann, "/agent")
	list := st.showing(topic, "Agents (/agent NAME")
	if !strings.Contains(list.Text, "default — Claude Code (this session's)") || !strings.Contains(list.Text, "helper — Claude Code") {
		t.Errorf("the list %q", list.Text)
	}
	st.srv.SendText(st.forum, topic, ann, "/agent helper")
	st.showing(topic, "This session now runs with helper (Claude Code). It starts its own conversation")
	if s := st.session(topic); s.Agent != "helper" {
		t.Fatalf("the session runs with %q", s.Agent)
	}
	st.helper.Say(claudetest.Text("Helper here, new to this."))
	st.srv.SendText(st.forum, topic, ann, "What was the word?")
	st.answeredOnce(topic, "Helper here, new to this.")
	reqs := st.helper.ModelRequests()
	if len(reqs) != 1 {
		t.Fatalf("helper's API got %d turns", len(reqs))
	}
	sent := strings.Join(reqs[0].Texts("user"), "\n")
	if strings.Contains(sent, "apricot") || !strings.Contains(sent, "What was the word?") {
		t.Errorf("helper was sent %q: it starts its own conversation", sent)
	}
	if n := len(st.api.ModelRequests()); n != 1 {
		t.Errorf("the default agent's API got %d turns, want the first only", n)
	}
	st.srv.SendText(st.forum, topic, ann, "/status")
	st.showing(topic, "agent helper (Claude Code)")

	// Back to the default: it resumes its own conversation.
	st.srv.SendText(st.forum, topic, ann, "/agent default")
	st.showing(topic, "This session now runs with default (Claude Code)")
	st.api.Say(claudetest.Text("The word was apricot."))
	st.srv.SendText(st.forum, topic, ann, "And now?")
	st.answeredOnce(topic, "The word was apricot.")
	last := st.api.ModelRequests()
	if sent := strings.Join(last[len(last)-1].Texts("user"), "\n"); !strings.Contains(sent, "apricot") {
		t.Errorf("the default agent was sent %q, want its earlier turn", sent)
	}
	if s, err := st.m.Daemon().Store.Session(context.Background(), st.session(topic).ID); err != nil || s.Agent != "" {
		t.Errorf("session %+v %v", s, err)
	}
}
