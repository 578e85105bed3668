// Package platformtest holds what the tests of platform packages share
// with those of parley's configuration: the descriptions of a section's
// keys, which `parley init`'s example shows, are the doc comments of the
// section's fields, generated into a Go file by a test (TestKeyDocs) that
// fails when they are stale, since Go keeps no comments at run time.
package platformtest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// KeyDocs reads the doc comment of every field of the struct type typ that
// has a toml tag, and of the fields of its nested sections, from the Go
// source of their packages in this module, keyed like the configuration's
// keys: "listen", "http", "http.listen". A field without a comment of its
// own shares the comment of the one before it ("A and B are …"). A key's
// comment is written in the words of the file: its first word, the field's
// Go name, becomes its key, and so do its siblings' names elsewhere.
func KeyDocs(tb testing.TB, typ reflect.Type) map[string]string {
	tb.Helper()
	module, root := moduleRoot(tb)
	structs := map[string]map[string]string{} // "pkg.Type" → field → doc
	parsed := map[string]bool{}
	parse := func(pkg string) {
		if parsed[pkg] {
			return
		}
		parsed[pkg] = true
		rel, ok := strings.CutPrefix(pkg, module)
		if !ok {
			tb.Fatalf("section type in %s, outside the module", pkg)
		}
		dir := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(rel, "/")))
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			tb.Fatal(err)
		}
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				tb.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				ts, ok := n.(*ast.TypeSpec)
				if !ok {
					return true
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					return false
				}
				m := map[string]string{}
				prev := ""
				for _, fl := range st.Fields.List {
					doc := fl.Doc.Text()
					if doc == "" {
						doc = fl.Comment.Text()
					}
					if doc == "" {
						doc = prev
					}
					prev = doc
					for _, id := range fl.Names {
						m[id.Name] = doc
					}
				}
				structs[pkg+"."+ts.Name.Name] = m
				return false
			})
		}
	}
	docs := map[string]string{}
	var walk func(t reflect.Type, path []string)
	walk = func(typ reflect.Type, path []string) {
		parse(typ.PkgPath())
		own := structs[typ.PkgPath()+"."+typ.Name()]
		// The doc comments name fields by their Go names: say the keys.
		names := map[string]string{}
		for i := range typ.NumField() {
			sf := typ.Field(i)
			if key, _, _ := strings.Cut(sf.Tag.Get("toml"), ","); key != "" && key != "-" {
				names[sf.Name] = key
			}
		}
		for i := range typ.NumField() {
			sf := typ.Field(i)
			key, ok := names[sf.Name]
			if !ok || !sf.IsExported() {
				continue
			}
			p := append(slices.Clip(path), key)
			leaf := sf.Type.Kind() != reflect.Struct || reflect.PointerTo(sf.Type).Implements(textUnmarshaler)
			doc := own[sf.Name]
			if leaf {
				doc = keyWords(doc, sf.Name, names)
			}
			docs[strings.Join(p, ".")] = strings.TrimSpace(doc)
			if !leaf {
				walk(sf.Type, p)
			}
		}
	}
	walk(typ, nil)
	return docs
}

var textUnmarshaler = reflect.TypeFor[interface{ UnmarshalText([]byte) error }]()

var word = regexp.MustCompile(`[A-Za-z0-9_]+`)

// keyWords rewrites a field's doc comment in the words of the file: its
// first word, the field's own Go name, becomes its key, and so do the names
// of its sibling fields elsewhere (BotToken → bot_token, "requires Token" →
// "requires token"), except after a capitalised word, where the name is
// prose ("Socket Mode").
func keyWords(doc, self string, names map[string]string) string {
	if rest, ok := strings.CutPrefix(doc, self+" "); ok {
		doc = names[self] + " " + rest
	}
	var b strings.Builder
	prev, last := "", 0
	for _, loc := range word.FindAllStringIndex(doc, -1) {
		w := doc[loc[0]:loc[1]]
		b.WriteString(doc[last:loc[0]])
		key, ok := names[w]
		if ok && (prev == "" || prev[0] < 'A' || prev[0] > 'Z') {
			w = key
		}
		b.WriteString(w)
		prev, last = doc[loc[0]:loc[1]], loc[1]
	}
	b.WriteString(doc[last:])
	return b.String()
}

// moduleRoot finds the module the test runs in: its path and directory.
func moduleRoot(tb testing.TB) (module, dir string) {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for line := range strings.SplitSeq(string(data), "\n") {
				if m, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
					return strings.TrimSpace(m), dir
				}
			}
			tb.Fatalf("%s/go.mod names no module", dir)
		}
		up := filepath.Dir(dir)
		if up == dir {
			tb.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}

// CheckKeyDocsFile checks that file, a generated Go file, holds docs as
// the map literal that preamble (the file's text up to and including
// "var name = map[string]string{\n") opens, sorted by key, as gofmt writes
// it; with update it rewrites the file instead. tool names the command that
// rewrites it, for the message when it is stale.
func CheckKeyDocsFile(tb testing.TB, file, preamble string, docs map[string]string, update bool, tool string) {
	tb.Helper()
	var b bytes.Buffer
	b.WriteString(preamble)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range docs {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "\t%q: %q,\n", k, docs[k])
	}
	b.WriteString("}\n")
	src, err := format.Source(b.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	if update {
		if err := os.WriteFile(file, src, 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	have, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(have, src) {
		tb.Errorf("%s is stale (a key or its doc comment changed): run %s", file, tool)
	}
}
