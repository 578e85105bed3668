package config

import (
	"strings"
	"testing"
)

// TestMoreValidationMessages: rules whose messages no other test shows,
// each naming the key and the fix.
func TestMoreValidationMessages(t *testing.T) {
	tests := []struct {
		name, file string
		env        []string
		want       string
	}{
		// Only the environment can carry bytes that are not UTF-8: a TOML
		// file is UTF-8 by definition.
		{"notice not UTF-8", "", []string{"PARLEY_MCP_NO_AGENT_NOTICE=caf\xe9"},
			"config: mcp.no_agent_notice: not valid UTF-8 (set [mcp] no_agent_notice or PARLEY_MCP_NO_AGENT_NOTICE)"},
		// With an agent to run, an empty workdir cannot mean "where parley
		// was started": the message asks for the directory.
		{"agent without workdir", "[agent]\nkind = \"claude-code\"\nworkdir = \"\"\n", nil,
			"agent.workdir: empty, and the directory parley was started in is unknown; write the directory the agent works in"},
		// A key written quoted, as TOML allows, is still found on its line.
		{"quoted key", "[http]\n\n\"listen\" = 8765\n", nil, ":3: http.listen: incompatible types"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, msg := loadErr(t, tt.file, withHome(tt.env...))
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error does not contain %q:\n%s", tt.want, msg)
			}
		})
	}
}

// TestRedactMalformedSetting: an [agent] env item written without its
// NAME= (a key pasted alone) is refused by Load, but a Config holding one
// can still be logged: the whole item is masked, since there is no name
// to keep.
func TestRedactMalformedSetting(t *testing.T) {
	c := Default()
	c.Agent.Env = []string{"DISABLE_TELEMETRY=1", "sk-ant-pasted-alone"}
	r := c.Redacted()
	if got := strings.Join(r.Agent.Env, ","); got != "DISABLE_TELEMETRY=***,***" {
		t.Errorf("redacted env %q, want DISABLE_TELEMETRY=***,***", got)
	}
	if strings.Contains(c.String(), "sk-ant-pasted-alone") {
		t.Errorf("String shows the pasted key:\n%s", c.String())
	}
}
