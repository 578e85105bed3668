// Package filename makes the file names people give on a platform safe to
// store under parley's data directory. A name is never trusted as a path:
// Safe keeps its last element only, with no separators, traversal, hidden
// files or control characters and a bounded length, so every adapter that
// receives files stores them the same way. It imports only the standard
// library.
package filename

import (
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLen bounds a safe name in bytes, well under file systems' 255.
const MaxLen = 120

// Safe makes a platform-given name safe to use inside a directory: no path
// separators or traversal, no hidden files, no control characters, at most
// MaxLen bytes cut at a character boundary with the extension kept. It
// never returns "" or a name starting with a dot.
func Safe(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "/" || name == "." {
		name = ""
	}
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || unicode.IsControl(r) {
			return '_'
		}
		return r
	}, name)
	s := strings.TrimLeft(strings.TrimSpace(name), ".")
	if s == "" {
		s = "file"
	}
	if len(s) > MaxLen {
		ext := filepath.Ext(s)
		if len(ext) > 16 {
			ext = ""
		}
		stem, cut := s[:len(s)-len(ext)], MaxLen-len(ext)
		for cut > 0 && !utf8.RuneStart(stem[cut]) {
			cut--
		}
		s = stem[:cut] + ext
	}
	return s
}
