package config

import (
	"strings"
	"testing"
)

func TestAbsentPlatforms(t *testing.T) {
	const noSlack = "this build of parley has no Slack adapter (known platforms: telegram)"
	tests := []struct {
		name      string
		file      string
		env       []string
		platforms Platforms // default known
		want      []string  // substrings of the error; PATH is the file
		not       []string  // what the error must not say
	}{
		{name: "file section",
			file: "[slack]\nbot_token = \"xoxb-secret\"\nchannel = \"C1\"\n",
			want: []string{"config: PATH:1: [slack]: " + noSlack + "; remove the section or use a build that includes it"},
			not:  []string{"unknown", "slack.bot_token", "xoxb-secret"}},
		{name: "file section after others", file: "[log]\nlevel = \"info\"\n\n[matrix]\nhomeserver = \"https://m.example.org\"\n",
			want: []string{"config: PATH:4: [matrix]: this build of parley has no Matrix adapter (known platforms: telegram)"},
			not:  []string{"unknown", "homeserver"}},
		{name: "empty file section", file: "[slack]\n",
			want: []string{"PATH:1: [slack]: " + noSlack}},
		{name: "dotted key", file: "data_dir = \"/x\"\nslack.bot_token = \"xoxb-secret\"\n",
			want: []string{"config: PATH:2: [slack]: " + noSlack},
			not:  []string{"unknown", "xoxb-secret"}},
		{name: "variable", env: []string{"PARLEY_SLACK_BOT_TOKEN=xoxb-secret"},
			want: []string{"config: PARLEY_SLACK_BOT_TOKEN: " + noSlack + "; unset it or use a build that includes it"},
			not:  []string{"xoxb-secret"}},
		{name: "variables", env: []string{"PARLEY_SLACK_CHANNEL=C1", "PARLEY_SLACK_BOT_TOKEN=xoxb-1", "PARLEY_MATRIX_HOMESERVER=https://m.example.org"},
			want: []string{"config: PARLEY_SLACK_BOT_TOKEN, PARLEY_SLACK_CHANNEL: " + noSlack + "; unset them",
				"config: PARLEY_MATRIX_HOMESERVER: this build of parley has no Matrix adapter"}},
		{name: "file and variable", file: "[slack]\nchannel = \"C1\"\n", env: []string{"PARLEY_SLACK_BOT_TOKEN=xoxb-1"},
			want: []string{"PATH:1: [slack]: " + noSlack, "PARLEY_SLACK_BOT_TOKEN: " + noSlack}},
		{name: "build without platforms", env: []string{"PARLEY_MATRIX_USER_ID=@p:e"},
			platforms: Platforms{Absent: []string{"matrix"}},
			want:      []string{"config: PARLEY_MATRIX_USER_ID: this build of parley has no Matrix adapter (it has no platform adapters)"}},
		{name: "not told it is absent", file: "[slack]\nbot_token = \"x\"\n", platforms: Platforms{Present: []string{"telegram"}},
			want: []string{"PATH:1: unknown table [slack]"}},
		{name: "misspelt absent platform", file: "[slak]\nbot_token = \"x\"\n",
			want: []string{"PATH:1: unknown table [slak] (did you mean slack?)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.platforms
			if p.Present == nil && p.Absent == nil {
				p = known
			}
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			_, err := Load(path, withHome(tt.env...), p)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			msg := err.Error()
			for _, w := range tt.want {
				if w = strings.ReplaceAll(w, "PATH", path); !strings.Contains(msg, w) {
					t.Errorf("error does not contain %q:\n%s", w, msg)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(msg, n) {
					t.Errorf("error contains %q:\n%s", n, msg)
				}
			}
		})
	}
}

// TestAbsentPlatformFirst checks that an absent platform is reported
// before the file's other problems, which are still all reported.
func TestAbsentPlatformFirst(t *testing.T) {
	path, msg := loadErr(t, "[log]\nlevel = \"loud\"\ncolour = true\n[slack]\nbot_token = \"x\"\n", withHome("PARLEY_HTTP_LISTEN=nope"))
	lines := strings.Split(msg, "\n")
	if !strings.HasPrefix(lines[0], "config: "+path+":4: [slack]: this build of parley has no Slack adapter") {
		t.Errorf("first problem is not the absent platform:\n%s", msg)
	}
	for _, w := range []string{"unknown key log.colour", "log.level", "http.listen"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error does not mention %s:\n%s", w, msg)
		}
	}
}

func TestAbsentPlatformEmptyVariable(t *testing.T) {
	// Empty variables count as unset, as everywhere.
	load(t, "", withHome("PARLEY_SLACK_BOT_TOKEN=", "PARLEY_MATRIX_HOMESERVER="))
}
