package config

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"github.com/BurntSushi/toml"
)

// Example returns a commented example configuration file, as `parley init`
// writes it for a build with the platforms p: every key of Config, the
// platforms' included, section by section, each under its
// description, its environment variable and its default, written as a
// commented-out assignment of the default ("# listen = "127.0.0.1:8765"").
// The file therefore loads as the defaults, and a person uncomments what
// they change. The data directory's default depends on env (HOME,
// XDG_DATA_HOME), as Load's does.
//
// It is generated from the same walk of Config's toml tags as Load and the
// environment variables, so it cannot leave a key out; the descriptions are
// the fields' Go doc comments, copied into keydocs.go (and, for a platform's
// section, into its package: Platform.KeyDocs) by a test that fails when
// they are stale.
func Example(env []string, p Platforms) []byte {
	def := defaults(env, p.Present)
	docs := maps.Clone(keyDocs)
	for _, pl := range p.Present {
		docs[string(pl.Name)] = pl.Doc
		for k, d := range pl.KeyDocs {
			docs[string(pl.Name)+"."+k] = d
		}
	}
	var b bytes.Buffer
	b.WriteString(`# parley configuration.
#
# Every key is shown with its default value, commented out: remove the "#"
# in front of a key to change it. Each key can also be set by the
# environment variable named above it, which wins over this file. A
# platform is enabled by setting its token. "parley doctor --config FILE"
# checks the result.
`)
	current, lastDoc := "", ""
	for _, f := range fields(&def) {
		section, name, inSection := strings.Cut(f.key, ".")
		if !inSection {
			section, name = "", f.key
		}
		if section != current {
			if current == "agent" {
				b.WriteString(agentsExample)
			}
			current = section
			b.WriteString("\n")
			comment(&b, docs[section])
			fmt.Fprintf(&b, "[%s]\n", section)
		}
		b.WriteString("\n")
		// Keys declared together share one doc comment ("A and B are
		// …"): it is written once, above the first of them.
		if doc := docs[f.key]; doc != lastDoc {
			comment(&b, doc)
			lastDoc = doc
		}
		fmt.Fprintf(&b, "# Environment: %s\n", f.env)
		fmt.Fprintf(&b, "# %s\n", assignment(name, f.v))
	}
	return b.Bytes()
}

// comment writes text as comment lines.
func comment(b *bytes.Buffer, text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	for line := range strings.SplitSeq(text, "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
}

// assignment writes key = value in TOML, as the encoder writes the value;
// an unset list is written as the empty list, since TOML has no null.
func assignment(key string, v reflect.Value) string {
	if v.Kind() == reflect.Slice && v.Len() == 0 {
		return key + " = []"
	}
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(map[string]any{key: v.Interface()}); err != nil {
		// Every key's type is one the loader decodes, and the encoder
		// writes those; a new type that it cannot is a programming error
		// that the example's test catches.
		panic(fmt.Sprintf("config: example: %s: %v", key, err))
	}
	return strings.TrimSpace(b.String())
}
