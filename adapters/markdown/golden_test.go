package markdown

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// dialects are every dialect of the package, each with golden files.
var dialects = []Dialect{TelegramHTML, Plain, Slack, MatrixHTML}

// TestGolden renders each testdata/NAME.md in every dialect and compares
// the result with NAME.DIALECT.golden, byte for byte. Regenerate with
// go test -run TestGolden -update.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden inputs in testdata")
	}
	for _, file := range files {
		base := strings.TrimSuffix(file, ".md")
		t.Run(filepath.Base(base), func(t *testing.T) {
			src, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			md := string(src)
			for _, d := range dialects {
				path := base + "." + d.Name() + ".golden"
				got := Render(md, d)
				if *update {
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
				} else if want, err := os.ReadFile(path); err != nil {
					t.Errorf("%v (run with -update to create it)", err)
				} else if got != string(want) {
					t.Errorf("%s differs:\n%s", path, firstDiff(string(want), got))
				}
				checkRendered(t, md, d)
			}
		})
	}
}

// firstDiff shows where got first departs from want.
func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g || i >= len(wl) || i >= len(gl) {
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q", i+1, w, g)
		}
	}
	return "(no line differs)"
}

// checkRendered checks the properties every rendering of md in d must
// have: valid for the platform, visible text within MaxGrowth of the
// source, and lengths counted as the platform counts them.
func checkRendered(t *testing.T, md string, d Dialect) {
	t.Helper()
	if err := checkRendering(md, d, Render(md, d), MaxGrowth); err != nil {
		t.Errorf("%s: %v", d.Name(), err)
	}
}

// checkRendering checks out, md rendered in d with an allowance of allow.
func checkRendering(md string, d Dialect, out string, allow int) error {
	if err := validate(d, out); err != nil {
		return fmt.Errorf("%q renders %q: %v", clip(md), clip(out), err)
	}
	if n, m := d.Visible(out), delivery.Measure(md, d.Unit()); n > m+allow {
		return fmt.Errorf("%q renders %q: visible length %d > %d + %d", clip(md), clip(out), n, m, allow)
	}
	if got, want := d.Visible(out), visibleText(d, out); got != want {
		return fmt.Errorf("%q renders %q: Visible %d, want %d", clip(md), clip(out), got, want)
	}
	if got, want := d.Length(md, out), platformLength(d, md, out); got != want {
		return fmt.Errorf("%q renders %q: Length %d, want %d", clip(md), clip(out), got, want)
	}
	return nil
}

var (
	tagPattern       = regexp.MustCompile(`<[^>]*>`)
	slackLinkPattern = regexp.MustCompile(`<[^|>]*\|([^>]*)>`)
	slackUnescaper   = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&")
)

// visibleText counts out's visible text independently of the dialects'
// Visible, for the markup the walk writes: tags and link syntax removed,
// escapes decoded.
func visibleText(d Dialect, out string) int {
	switch d {
	case TelegramHTML, MatrixHTML:
		out = htmlUnescaper.Replace(tagPattern.ReplaceAllString(out, ""))
	case Slack:
		out = slackUnescaper.Replace(slackLinkPattern.ReplaceAllString(out, "$1"))
		out = strings.ReplaceAll(out, "\u200b", "")
	}
	return delivery.Measure(out, d.Unit())
}

// platformLength is what each platform counts, computed independently of
// the dialects' Length: Telegram the UTF-16 code units of the visible text,
// Slack the bytes of the text, Matrix the bytes of body and
// formatted_body.
func platformLength(d Dialect, md, out string) int {
	switch d {
	case TelegramHTML:
		return delivery.Measure(htmlUnescaper.Replace(tagPattern.ReplaceAllString(out, "")), core.UTF16)
	case Plain:
		return delivery.Measure(out, core.UTF16)
	case Slack:
		return len(out)
	case MatrixHTML:
		body, _ := Matrix(md)
		return len(body) + len(out)
	}
	panic("unknown dialect " + d.Name())
}

func clip(s string) string {
	if len(s) > 300 {
		s = s[:300]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
		return s + "…"
	}
	return s
}

// checkAll checks md's rendering in every dialect.
func checkAll(t *testing.T, md string) {
	t.Helper()
	for _, d := range dialects {
		checkRendered(t, md, d)
	}
}
