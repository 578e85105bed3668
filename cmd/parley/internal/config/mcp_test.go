package config

import (
	"strings"
	"testing"
)

// [mcp] no_agent_notice: a text, "" for none, refused when it is only
// white space or too long, from the file and from the environment.
func TestNoAgentNotice(t *testing.T) {
	if c := load(t, "[mcp]\nno_agent_notice = \"\"\n", home); c.MCP.NoAgentNotice != "" {
		t.Fatalf(`"" should send none: %q`, c.MCP.NoAgentNotice)
	}
	if c := load(t, "", append(home, "PARLEY_MCP_NO_AGENT_NOTICE=Nobody here")); c.MCP.NoAgentNotice != "Nobody here" {
		t.Fatalf("from the environment: %q", c.MCP.NoAgentNotice)
	}
	for _, tt := range []struct{ file, want string }{
		{"[mcp]\nno_agent_notice = \"   \"\n", `mcp.no_agent_notice: only white space`},
		{"[mcp]\nno_agent_notice = \"" + strings.Repeat("x", 1001) + "\"\n", "mcp.no_agent_notice: 1001 bytes, more than 1000"},
	} {
		if _, msg := loadErr(t, tt.file, home); !strings.Contains(msg, tt.want) {
			t.Errorf("error %q does not say %q", msg, tt.want)
		}
	}
}
