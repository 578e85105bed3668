package config

import (
	"strings"
	"testing"
)

func TestAbsentPlatforms(t *testing.T) {
	const noMatrix = "this build of parley has no Matrix adapter (known platforms: telegram, slack)"
	tests := []struct {
		name      string
		file      string
		env       []string
		platforms Platforms // default known
		want      []string  // substrings of the error; PATH is the file
		not       []string  // what the error must not say
	}{
		{name: "file section",
			file: "[matrix]\naccess_token = \"syt-secret\"\nroom = \"!r:e\"\n",
			want: []string{"config: PATH:1: [matrix]: " + noMatrix + "; remove the section or use a build that includes it"},
			not:  []string{"unknown", "matrix.access_token", "syt-secret"}},
		{name: "file section after others", file: "[log]\nlevel = \"info\"\n\n[discord]\ntoken = \"d\"\n",
			want: []string{"config: PATH:4: [discord]: this build of parley has no Discord adapter (known platforms: telegram, slack)"},
			not:  []string{"unknown", "token"}},
		{name: "empty file section", file: "[matrix]\n",
			want: []string{"PATH:1: [matrix]: " + noMatrix}},
		{name: "dotted key", file: "data_dir = \"/x\"\nmatrix.access_token = \"syt-secret\"\n",
			want: []string{"config: PATH:2: [matrix]: " + noMatrix},
			not:  []string{"unknown", "syt-secret"}},
		{name: "variable", env: []string{"PARLEY_MATRIX_ACCESS_TOKEN=syt-secret"},
			want: []string{"config: PARLEY_MATRIX_ACCESS_TOKEN: " + noMatrix + "; unset it or use a build that includes it"},
			not:  []string{"syt-secret"}},
		{name: "variables", env: []string{"PARLEY_MATRIX_ROOM=!r:e", "PARLEY_MATRIX_ACCESS_TOKEN=syt-1", "PARLEY_DISCORD_TOKEN=d"},
			want: []string{"config: PARLEY_MATRIX_ACCESS_TOKEN, PARLEY_MATRIX_ROOM: " + noMatrix + "; unset them",
				"config: PARLEY_DISCORD_TOKEN: this build of parley has no Discord adapter"}},
		{name: "file and variable", file: "[matrix]\nroom = \"!r:e\"\n", env: []string{"PARLEY_MATRIX_ACCESS_TOKEN=syt-1"},
			want: []string{"PATH:1: [matrix]: " + noMatrix, "PARLEY_MATRIX_ACCESS_TOKEN: " + noMatrix}},
		{name: "build without platforms", env: []string{"PARLEY_MATRIX_USER_ID=@p:e"},
			platforms: Platforms{Absent: []string{"matrix"}},
			want:      []string{"config: PARLEY_MATRIX_USER_ID: this build of parley has no Matrix adapter (it has no platform adapters)"}},
		{name: "not told it is absent", file: "[discord]\ntoken = \"x\"\n", platforms: Platforms{Present: known.Present},
			want: []string{"PATH:1: unknown table [discord]"}},
		{name: "misspelt absent platform", file: "[matirx]\nroom = \"x\"\n",
			want: []string{"PATH:1: unknown table [matirx] (did you mean matrix?)"}},
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
	path, msg := loadErr(t, "[log]\nlevel = \"loud\"\ncolour = true\n[matrix]\nroom = \"x\"\n", withHome("PARLEY_HTTP_LISTEN=nope"))
	lines := strings.Split(msg, "\n")
	if !strings.HasPrefix(lines[0], "config: "+path+":4: [matrix]: this build of parley has no Matrix adapter") {
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
	load(t, "", withHome("PARLEY_MATRIX_ACCESS_TOKEN=", "PARLEY_DISCORD_TOKEN="))
}
