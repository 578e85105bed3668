package config

import (
	"os"
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

// [mcp] send_dirs: by default the working directory and the temporary
// directory, [] allows none, and each entry must be an absolute path, from
// the file or the environment.
func TestSendDirs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	if c := load(t, "", home); strings.Join(c.MCP.SendDirs, "|") != wd+"|"+os.TempDir() {
		t.Fatalf("default %q, want the working and the temporary directory", c.MCP.SendDirs)
	}
	if c := load(t, "[mcp]\nsend_dirs = []\n", home); c.MCP.SendDirs == nil || len(c.MCP.SendDirs) != 0 {
		t.Fatalf("[] should allow none: %#v", c.MCP.SendDirs)
	}
	if c := load(t, "", append(home, "PARLEY_MCP_SEND_DIRS=/srv/out, /tmp")); strings.Join(c.MCP.SendDirs, "|") != "/srv/out|/tmp" {
		t.Fatalf("from the environment: %q", c.MCP.SendDirs)
	}
	if _, msg := loadErr(t, "[mcp]\nsend_dirs = [\"/ok\", \"work\"]\n", home); !strings.Contains(msg, `mcp.send_dirs: "work" is not an absolute path`) ||
		!strings.Contains(msg, "PARLEY_MCP_SEND_DIRS") {
		t.Errorf("error %q does not name the key, the value and the fix", msg)
	}
}

// [mcp] max_sessions: at least 1.
func TestMaxSessions(t *testing.T) {
	if c := load(t, "", append(home, "PARLEY_MCP_MAX_SESSIONS=3")); c.MCP.MaxSessions != 3 {
		t.Fatalf("from the environment: %d", c.MCP.MaxSessions)
	}
	if _, msg := loadErr(t, "[mcp]\nmax_sessions = 0\n", home); !strings.Contains(msg, "mcp.max_sessions: 0; at least 1 (default 256)") {
		t.Errorf("error %q", msg)
	}
}
