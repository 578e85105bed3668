package config

import (
	"encoding"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// envPrefix starts every variable that overrides a key.
const envPrefix = "PARLEY_"

// field is one leaf key of Config, found by walking its toml tags.
type field struct {
	key    string        // dotted TOML key: "http.listen"
	env    string        // its variable: "PARLEY_HTTP_LISTEN"
	secret bool          // tagged secret:"true": redacted, never printed
	url    bool          // tagged url:"true": a URL whose password is redacted
	v      reflect.Value // the settable field in the Config walked
}

var textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()

// platformsType is the type of Config.Platforms, whose sections the walks
// below take in its place.
var platformsType = reflect.TypeFor[[]PlatformSection]()

// fields lists the leaf keys of c in declaration order, the platforms'
// sections in the place of Config.Platforms. A struct field is a section
// unless its type unmarshals itself from text (like Duration); every other
// field with a toml tag is a key.
func fields(c *Config) []field {
	var out []field
	var walk func(v reflect.Value, path []string)
	walk = func(v reflect.Value, path []string) {
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.Type == platformsType {
				for _, ps := range c.Platforms {
					walk(reflect.ValueOf(ps.Section).Elem(), []string{ps.Name})
				}
				continue
			}
			if sf.Type == agentsType {
				for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
					walk(reflect.ValueOf(c.Agents[name]).Elem(), []string{agentsTable, name})
				}
				continue
			}
			name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
			if name == "" || name == "-" || !sf.IsExported() {
				continue
			}
			p := append(slices.Clip(path), name)
			fv := v.Field(i)
			if sf.Type.Kind() == reflect.Struct && !reflect.PointerTo(sf.Type).Implements(textUnmarshaler) {
				walk(fv, p)
				continue
			}
			out = append(out, field{
				key:    strings.Join(p, "."),
				env:    envName(p),
				secret: sf.Tag.Get("secret") == "true",
				url:    sf.Tag.Get("url") == "true",
				v:      fv,
			})
		}
	}
	walk(reflect.ValueOf(c).Elem(), nil)
	return out
}

// section is one top-level table of Config.
type section struct {
	name string        // its toml name: "telegram"
	v    reflect.Value // the field in the Config walked
}

// sections lists the tables of c in declaration order, found like fields.
func sections(c *Config) []section {
	var out []section
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if sf.Type == platformsType {
			for _, ps := range c.Platforms {
				out = append(out, section{name: ps.Name, v: reflect.ValueOf(ps.Section).Elem()})
			}
			continue
		}
		if sf.Type == agentsType {
			for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
				out = append(out, section{name: agentsTable + "." + name, v: reflect.ValueOf(c.Agents[name]).Elem()})
			}
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("toml"), ",")
		if name == "" || name == "-" || !sf.IsExported() ||
			sf.Type.Kind() != reflect.Struct || reflect.PointerTo(sf.Type).Implements(textUnmarshaler) {
			continue
		}
		out = append(out, section{name: name, v: v.Field(i)})
	}
	return out
}

// tomlView returns a struct of c's top-level keys and sections, the
// platforms' sections in the place of Config.Platforms, each a field
// tagged with its name, holding copies of c's values: what the TOML
// decoder and encoder, which know struct fields only, read and write. dst
// are c's values in the view's field order, to copy a decoded view back.
func (c *Config) tomlView() (view reflect.Value, dst []reflect.Value) {
	v := reflect.ValueOf(c).Elem()
	var sfs []reflect.StructField
	for i := range v.NumField() {
		sf := v.Type().Field(i)
		if sf.Type == platformsType {
			for j, ps := range c.Platforms {
				sv := reflect.ValueOf(ps.Section).Elem()
				sfs = append(sfs, reflect.StructField{Name: fmt.Sprintf("Platform%d", j), Type: sv.Type(),
					Tag: reflect.StructTag(fmt.Sprintf("toml:%q", ps.Name))})
				dst = append(dst, sv)
			}
			continue
		}
		if sf.Type == agentsType {
			// The named agents are one table of tables, [agents.NAME].
			sfs = append(sfs, reflect.StructField{Name: sf.Name, Type: sf.Type, Tag: reflect.StructTag(fmt.Sprintf("toml:%q", agentsTable))})
			dst = append(dst, v.Field(i))
			continue
		}
		sfs = append(sfs, reflect.StructField{Name: sf.Name, Type: sf.Type, Tag: sf.Tag})
		dst = append(dst, v.Field(i))
	}
	view = reflect.New(reflect.StructOf(sfs)).Elem()
	for i, d := range dst {
		view.Field(i).Set(d)
	}
	return view, dst
}

// decode decodes a TOML document into c, over what c holds.
func (c *Config) decode(data string) (toml.MetaData, error) {
	view, dst := c.tomlView()
	md, err := toml.Decode(data, view.Addr().Interface())
	for i, d := range dst {
		d.Set(view.Field(i))
	}
	return md, err
}

// envName is the variable for a key path: PARLEY_ and the parts in upper
// case joined by underscores.
func envName(path []string) string {
	return envPrefix + strings.ToUpper(strings.Join(path, "_"))
}

// envMap turns an os.Environ-style list into a map; later entries win.
func envMap(env []string) map[string]string {
	m := make(map[string]string, len(env))
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}

// applyEnv sets every key whose variable is set (to something non-empty)
// in env, and returns one error per malformed value, naming the variable.
func applyEnv(c *Config, env []string) []error {
	vars := envMap(env)
	var errs []error
	for _, f := range fields(c) {
		s := vars[f.env]
		if s == "" {
			continue
		}
		if err := setText(f.v, s); err != nil {
			if f.secret {
				err = fmt.Errorf("not a valid value") // never echo a secret
			}
			errs = append(errs, fmt.Errorf("config: %s: %w", f.env, err))
		}
	}
	return errs
}

// setText parses s into v according to v's type.
func setText(v reflect.Value, s string) error {
	if u, ok := v.Addr().Interface().(encoding.TextUnmarshaler); ok {
		return u.UnmarshalText([]byte(s))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (true or false)", s)
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("%q is not an integer", s)
		}
		v.SetInt(n)
	case reflect.Slice:
		var items []string
		for item := range strings.SplitSeq(s, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		list := reflect.MakeSlice(v.Type(), len(items), len(items))
		for i, item := range items {
			if err := setText(list.Index(i), item); err != nil {
				return fmt.Errorf("%q: item %d: %w", s, i+1, err)
			}
		}
		v.Set(list)
	default:
		return fmt.Errorf("cannot set a %s from the environment", v.Type())
	}
	return nil
}

// UnknownEnv returns the names of the PARLEY_ variables in env that match no
// configuration key of a build with the platforms p, most likely misspelt,
// for the caller to warn about. Variables parley reads for other purposes
// are the caller's to exclude.
func UnknownEnv(env []string, p Platforms) []string {
	known := map[string]bool{}
	for _, f := range fields(&Config{Platforms: newSections(p.Present)}) {
		known[f.env] = true
	}
	var out []string
	for name := range envMap(env) {
		if _, _, agent := agentEnvName(name); strings.HasPrefix(name, envPrefix) && !known[name] && !agent {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
