package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// absentSections refuses each top-level table (or dotted key) of the file
// that belongs to a platform this build lacks, naming the platform, before
// and instead of any complaint about its keys: "unknown key slack.bot_token"
// would send the reader looking for a typo that is not there.
func absentSections(path, data string, raw map[string]any, p Platforms) []error {
	var errs []error
	for _, name := range p.Absent {
		if _, ok := raw[name]; !ok {
			continue
		}
		where := path
		if line := keyLine(data, toml.Key{name}); line > 0 {
			where = fmt.Sprintf("%s:%d", path, line)
		}
		errs = append(errs, fmt.Errorf("config: %s: [%s]: %s; remove the section or use a build that includes it",
			where, name, noAdapter(name, p.names())))
	}
	return errs
}

// absentEnv refuses the PARLEY_<PLATFORM>_* variables of platforms this
// build lacks, one error per platform naming every such variable set.
func absentEnv(env []string, p Platforms) []error {
	vars := envMap(env)
	var errs []error
	for _, name := range p.Absent {
		prefix := envName([]string{name}) + "_"
		var set []string
		for v, value := range vars {
			// An empty variable counts as unset, as everywhere else.
			if strings.HasPrefix(v, prefix) && value != "" {
				set = append(set, v)
			}
		}
		if len(set) == 0 {
			continue
		}
		slices.Sort(set)
		them := "them"
		if len(set) == 1 {
			them = "it"
		}
		errs = append(errs, fmt.Errorf("config: %s: %s; unset %s or use a build that includes it",
			strings.Join(set, ", "), noAdapter(name, p.names()), them))
	}
	return errs
}

// names are the names of the platforms present.
func (p Platforms) names() []string {
	out := make([]string, 0, len(p.Present))
	for _, pl := range p.Present {
		out = append(out, string(pl.Name))
	}
	return out
}

// noAdapter says that this build lacks the platform name and which it has.
func noAdapter(name string, present []string) string {
	has := "known platforms: " + strings.Join(present, ", ")
	if len(present) == 0 {
		has = "it has no platform adapters"
	}
	return fmt.Sprintf("this build of parley has no %s adapter (%s)", title(name), has)
}

// title is a platform's name as people write it: slack → Slack.
func title(name string) string {
	if name == "" {
		return name
	}
	return strings.ToUpper(name[:1]) + name[1:]
}

// unknownKeys reports the file's keys that c (a Config with its platforms'
// sections) does not have, each once (not every key under an unknown
// table), with a suggestion.
//
// Keys under an absent platform's section are left to absentSections, which
// refuses the section as a whole; the absent platforms' names are offered as
// suggestions, so that [slak] is told about slack.
func unknownKeys(path, data string, md toml.MetaData, c *Config, absent []string) []error {
	known := map[string]bool{}
	for _, f := range fields(c) {
		known[f.key] = true
		if section, _, ok := strings.Cut(f.key, "."); ok {
			known[section] = true
		}
	}
	for _, name := range absent {
		known[name] = true
	}
	seen := map[string]bool{}
	var errs []error
	for _, k := range md.Undecoded() {
		if slices.Contains(absent, k[0]) {
			continue
		}
		key := k.String()
		if len(k) > 1 && seen[toml.Key(k[:len(k)-1]).String()] {
			seen[key] = true
			continue
		}
		seen[key] = true
		where := path
		if line := keyLine(data, k); line > 0 {
			where = fmt.Sprintf("%s:%d", path, line)
		}
		what := "key " + key
		if md.Type(k...) == "Hash" {
			what = "table [" + key + "]"
		}
		errs = append(errs, fmt.Errorf("config: %s: unknown %s%s", where, what, suggest(key, known)))
	}
	return errs
}

// suggest offers the known key closest to an unknown one, or lists the keys
// of its section.
func suggest(key string, known map[string]bool) string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range known {
			if !yield(k) {
				return
			}
		}
	})
	best, bestDist := "", 3
	for _, k := range keys {
		if d := editDistance(key, k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %s?)", best)
	}
	section, _, ok := strings.Cut(key, ".")
	if !ok || !known[section] {
		return ""
	}
	var names []string
	for _, k := range keys {
		if name, ok := strings.CutPrefix(k, section+"."); ok {
			names = append(names, name)
		}
	}
	return fmt.Sprintf(" (known keys in [%s]: %s)", section, strings.Join(names, ", "))
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// keyLine finds the line where key is set in a TOML text, for the simple
// shapes config files take (tables, key = value, dotted keys); 0 if not
// found.
func keyLine(data string, key toml.Key) int {
	want := strings.Join(key, ".")
	table := ""
	for i, line := range strings.Split(data, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			name := strings.Trim(strings.SplitN(line, "]", 2)[0], "[ \t")
			table = unquoteKey(name)
			if table == want {
				return i + 1
			}
		case strings.Contains(line, "="):
			k := unquoteKey(strings.TrimSpace(strings.SplitN(line, "=", 2)[0]))
			if table != "" {
				k = table + "." + k
			}
			if k == want || strings.HasPrefix(want, k+".") || strings.HasPrefix(k, want+".") {
				return i + 1
			}
		}
	}
	return 0
}

// unquoteKey turns a TOML dotted key as written into its parts joined by
// dots.
func unquoteKey(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if u, err := strconv.Unquote(p); err == nil {
			p = u
		} else {
			p = strings.Trim(p, "'")
		}
		parts[i] = p
	}
	return strings.Join(parts, ".")
}
