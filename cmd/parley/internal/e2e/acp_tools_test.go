package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/agent/modeltest"
)

// TestACPAgentSendsFile: the ACP agent parley runs for a session has
// parley's own MCP server (session/new's mcpServers), bound to that
// session by its credential: its model calls chat_assistant_post with a
// file of the work directory (under send_dirs), and the file arrives in
// the topic with the message, without an approval asked of people.
// [http] token is set: the agent never has it, its credential admits it.
func TestACPAgentSendsFile(t *testing.T) {
	forEachACPAgent(t, func(t *testing.T, ag acpAgent) {
		st := newACPStack(t, ag, func(c *config.Config) {
			c.MCP.SendDirs = []string{c.Agent.Workdir}
			c.HTTP.Token = "e2e-http-token-not-for-agents"
		})
		topic := st.newTopic("report")
		report := filepath.Join(st.workdir, "report.txt")
		if err := os.WriteFile(report, []byte("all green\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		st.model.Say(ag.parleyTool("chat_assistant_post", map[string]any{"content": "Here is the report.", "files": []string{report}}))
		st.model.Say(modeltest.Text("Sent you the report."))
		st.srv.SendText(st.forum, topic, ann, "Send me the report.")

		st.await("the report in the topic", func() bool {
			for _, d := range st.srv.Documents() {
				if d.Thread == topic && d.Name == "report.txt" && string(d.Content) == "all green\n" {
					return true
				}
			}
			return false
		})
		st.showing(topic, "Here is the report.")
		st.answeredOnce(topic, "Sent you the report.")
		if n := len(st.shown(topic, "Approve this tool call")); n != 0 {
			t.Errorf("parley's own tool was put to people for approval (%d questions)", n)
		}
		// The tool is the session's: its inbox has the post.
		var posted []string
		for _, m := range st.inbox() {
			posted = append(posted, m.Content)
		}
		if !slices.Contains(posted, "Here is the report.") {
			t.Errorf("the inbox holds %q", posted)
		}
	})
}
