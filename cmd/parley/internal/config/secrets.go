package config

import (
	"os"
	"strings"

	"github.com/BurntSushi/toml"
)

// FileSecrets returns the secret keys (tokens, passwords, signing secrets:
// those Redacted hides) that the TOML file at path sets to something, by
// their dotted names, for warning that a file other users can read holds
// them. A file that cannot be read or parsed holds none as far as it can
// tell; Load reports those problems.
func FileSecrets(path string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		return nil
	}
	var out []string
	for _, f := range fields(&Config{}) {
		if !f.secret {
			continue
		}
		var v any = raw
		for part := range strings.SplitSeq(f.key, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[part]
		}
		if s, ok := v.(string); ok && s != "" {
			out = append(out, f.key)
		}
	}
	return out
}
