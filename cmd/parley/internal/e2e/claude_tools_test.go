package e2e

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/parley-chat/parley/cmd/parley/internal/config"
	"github.com/parley-chat/parley/mcp/claudecode/claudetest"
)

// TestClaudeCodeGetsParleyTools: the Claude Code parley runs for a session
// has parley's own MCP server, bound to that session by its credential,
// and uses its tools without an approval (permissions = "ask"): the model
// sends a file from its work directory (under send_dirs) with
// chat_assistant_post, and it arrives in the topic; it asks a question
// with buttons with ui_ask, Ann clicks one, and the model reads her
// answer. [http] token is set: the agent never has it, its credential
// admits it.
func TestClaudeCodeGetsParleyTools(t *testing.T) {
	t.Parallel()
	cc := newCCStackConfig(t, func(c *config.Config) {
		c.MCP.SendDirs = []string{c.Agent.Workdir}
		// The agent reaches /mcp with its session's credential alone.
		c.HTTP.Token = "e2e-http-token-not-for-agents"
	})
	topic := cc.newTopic("report")
	report := filepath.Join(cc.workdir, "report.txt")
	if err := os.WriteFile(report, []byte("all green\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cc.api.Script(
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Tool("mcp__parley__chat_assistant_post",
			map[string]any{"content": "Here is the report.", "files": []string{report}})}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Tool("mcp__parley__ui_ask",
			map[string]any{"question": "Ship it?", "options": []string{"Yes", "Not yet"}})}},
		claudetest.Reply{Blocks: []claudetest.Block{claudetest.Text("Shipping, as you said.")}},
	)
	cc.srv.SendText(cc.forum, topic, ann, "Send me the report, then ask whether to ship.")

	cc.await("the report in the topic", func() bool {
		for _, d := range cc.srv.Documents() {
			if d.Thread == topic && d.Name == "report.txt" && string(d.Content) == "all green\n" {
				return true
			}
		}
		return false
	})
	cc.showing(topic, "Here is the report.")
	q := cc.question(topic, "Ship it?")
	if len(q.Buttons) != 2 || q.Buttons[0][0].Text != "Yes" || q.Buttons[1][0].Text != "Not yet" {
		t.Fatalf("the question's buttons %+v", q.Buttons)
	}
	cc.srv.Click(cc.forum, q.ID, ann, q.Buttons[0][0].CallbackData)
	cc.answeredOnce(topic, "Shipping, as you said.")
	if n := len(cc.shown(topic, "Approve this tool call")); n != 0 {
		t.Errorf("parley's own tools were put to people for approval (%d questions)", n)
	}
	reqs := cc.api.ModelRequests()
	// Claude Code 2.1.328 defers MCP tools (its ToolSearch finds them):
	// the model is told their names, an agent's only, each once.
	offered := map[string]bool{}
	for _, name := range regexp.MustCompile(`mcp__parley__[A-Za-z0-9_.-]+`).FindAllString(string(reqs[0].Body), -1) {
		offered[name] = true
	}
	want := []string{"mcp__parley__chat_assistant_post", "mcp__parley__chat_read_since", "mcp__parley__session_get",
		"mcp__parley__session_list", "mcp__parley__session_rename", "mcp__parley__ui_ask"}
	if got := slices.Sorted(maps.Keys(offered)); !slices.Equal(got, want) {
		t.Errorf("the model is offered parley's tools %q, want %q", got, want)
	}
	results := reqs[len(reqs)-1].ToolResults()
	if len(results) == 0 || results[len(results)-1].IsError || !strings.Contains(results[len(results)-1].Text, "Yes") {
		t.Fatalf("the model was sent %+v, want Ann's answer", results)
	}
	// The tools are the session's: the session's inbox has the post.
	var posted []string
	for _, m := range cc.inbox() {
		posted = append(posted, m.Content)
	}
	if !slices.Contains(posted, "Here is the report.") {
		t.Errorf("the inbox holds %q", posted)
	}
}
