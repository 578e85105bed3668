package markdown

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

func TestDisplayWidth(t *testing.T) {
	tests := []struct {
		s    string
		want int
	}{
		{"abc", 3},
		{"日本", 4},
		{"ｆｕｌｌ", 8},
		{"e\u0301", 1},
		{"😀", 2},
		{"👍🏽", 2},
		{"👨‍👩‍👧", 2},
		{"❤️", 2},
		{"🇺🇦", 2},
	}
	for _, tt := range tests {
		if got := displayWidth(tt.s); got != tt.want {
			t.Errorf("displayWidth(%q) = %d, want %d", tt.s, got, tt.want)
		}
	}
}

// TestRenderGrowth feeds the renderings that add text in the worst shapes
// there are and checks that in every dialect the output keeps within
// MaxGrowth of the source, and still shows the content.
func TestRenderGrowth(t *testing.T) {
	var wide strings.Builder
	wide.WriteString("|a|b|\n|-|-|\n|" + strings.Repeat("w", 200) + "|x|\n")
	for range 300 {
		wide.WriteString("|a|b|\n")
	}
	var narrowTable strings.Builder
	narrowTable.WriteString("|k|v|\n|-|-|\n")
	for i := range 300 {
		fmt.Fprintf(&narrowTable, "|%s|%d|\n", strings.Repeat("k", i%7), i)
	}
	tests := []struct {
		name, md, contains string // contains "" means the dialect's rule
	}{
		{"renumbered list", strings.Repeat("1. x\n", 2000), "x"},
		{"renumbered nested", strings.Repeat("1. x\n   - y\n", 1000), "y"},
		{"numbers from a start", "99999999. a\n" + strings.Repeat("1. b\n", 1500), "b"},
		{"tab nesting", strings.Repeat("-\ta\n\t-\tb\n\t\t-\tc\n", 300), "c"},
		{"lazy lines", "- a\n" + strings.Repeat("    - b\nlazy\n", 500), "lazy"},
		{"deep nesting", nested(40), "x39"},
		{"wide table", wide.String(), "wwww"},
		{"narrow table", narrowTable.String(), "kkk"},
		{"rules", strings.Repeat("---\n", 1000), ""},
		{"code padding", strings.Repeat(">\t\tcode\n", 500), "code"},
		{"plain links", strings.Repeat("[a](http://b.c) ", 500), "a"},
		{"reference links", strings.Repeat("[a][r] ", 500) + "\n\n[r]: http://example.com/long/url/path", "a"},
		{"bold lines", "***" + strings.Repeat("a\n", 1000) + "b***", "a"},
		{"unclosed fences", strings.Repeat("```\nx\n\n", 300), "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, d := range dialects {
				checkRendered(t, tt.md, d)
				want := tt.contains
				if want == "" {
					want = d.Rule()
				}
				if out := Render(tt.md, d); !strings.Contains(out, want) {
					t.Errorf("%s lost %q: %q", d.Name(), want, clip(out))
				}
			}
		})
	}
}

// nested is a list nested n deep, each level indented two spaces more.
func nested(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%s- x%d\n", strings.Repeat("  ", i), i)
	}
	return b.String()
}

// TestRenderSplitChunks is Telegram's contract: markdown split at
// 4096-MaxGrowth by its own length renders every chunk within Telegram's
// 4096, in HTML and as plain text.
func TestRenderSplitChunks(t *testing.T) {
	src, err := os.ReadFile("testdata/long.md")
	if err != nil {
		t.Fatal(err)
	}
	md := strings.Repeat(string(src)+"\n\n", 4)
	chunks := delivery.Split(md, 4096-MaxGrowth, core.UTF16)
	if len(chunks) < 2 {
		t.Fatalf("got %d chunks, want the document split", len(chunks))
	}
	for i, c := range chunks {
		h := Render(c, TelegramHTML)
		if err := validateTelegramHTML(h); err != nil {
			t.Errorf("chunk %d: %v", i, err)
		}
		if n := VisibleLength(h); n > 4096 {
			t.Errorf("chunk %d: visible length %d > 4096", i, n)
		}
		if n := Measure(c, Plain); n > 4096 {
			t.Errorf("chunk %d: plain length %d > 4096", i, n)
		}
	}
}

// splitRendered cuts md with delivery.Split into chunks whose Measure in d is
// at most limit, cutting again, shorter, any chunk that renders too long:
// what a core can do with an adapter's RenderedLength.
func splitRendered(md string, d Dialect, limit int) []string {
	var chunks []string
	var cut func(s string, n int)
	cut = func(s string, n int) {
		for _, c := range delivery.Split(s, n, core.Bytes) {
			m := Measure(c, d)
			if m <= limit || n <= 16 {
				chunks = append(chunks, c)
				continue
			}
			cut(c, max(16, min(n*limit/m, len(c))-1))
		}
	}
	cut(md, limit)
	return chunks
}

// TestSplitByRenderedLength shows why Slack and Matrix split by rendered
// length: their escapes and markup count, so chunks cut by the source's
// length overflow, while chunks cut by Measure fit.
func TestSplitByRenderedLength(t *testing.T) {
	md := strings.Repeat("**Note**: a < b && c > d, see [the docs](https://example.com/docs).\n\n", 400)
	for _, tt := range []struct {
		d     Dialect
		limit int
	}{
		{Slack, 3500},
		{MatrixHTML, 8000},
		{TelegramHTML, 4096},
	} {
		t.Run(tt.d.Name(), func(t *testing.T) {
			overflow := false
			for _, c := range delivery.Split(md, tt.limit, core.Bytes) {
				overflow = overflow || Measure(c, tt.d) > tt.limit
			}
			if !overflow && tt.d != TelegramHTML {
				t.Errorf("chunks cut by source length all fit; the test shows nothing")
			}
			chunks := splitRendered(md, tt.d, tt.limit)
			notes := 0
			for i, c := range chunks {
				out, fits := Fit(c, tt.d, tt.limit)
				if !fits {
					t.Errorf("chunk %d: Measure %d > %d", i, Measure(c, tt.d), tt.limit)
				}
				notes += strings.Count(out, "Note")
			}
			if notes != 400 {
				t.Errorf("the chunks show %d notes, want 400", notes)
			}
		})
	}
}

func TestMeasureAndFit(t *testing.T) {
	md := "| a | b |\n|---|---|\n| long cell here | x |"
	for _, d := range dialects {
		if got, want := Measure(md, d), d.Length(md, Render(md, d)); got != want {
			t.Errorf("%s: Measure = %d, want %d", d.Name(), got, want)
		}
		if out, fits := Fit(md, d, 1<<20); !fits || out != Render(md, d) {
			t.Errorf("%s: Fit with room = %q, %v; want Render's output", d.Name(), out, fits)
		}
		if _, fits := Fit(md, d, 3); fits {
			t.Errorf("%s: Fit(3) fits", d.Name())
		}
	}
	// The padded table does not fit 30; the compact form does.
	if n := Measure(md, TelegramHTML); n <= 30 {
		t.Fatalf("Measure = %d, want the padded table longer than 30", n)
	}
	out, fits := Fit(md, TelegramHTML, 30)
	if want := "<pre>a | b\nlong cell here | x</pre>"; !fits || out != want {
		t.Errorf("Fit(30) = %q, %v; want %q, true", out, fits, want)
	}
}

func TestRenderConcurrent(t *testing.T) {
	src, err := os.ReadFile("testdata/long.md")
	if err != nil {
		t.Fatal(err)
	}
	md := string(src)
	var wg sync.WaitGroup
	for _, d := range dialects {
		want := Render(md, d)
		for range 4 {
			wg.Go(func() {
				for range 10 {
					if got := Render(md, d); got != want {
						t.Errorf("%s: Render is not deterministic under concurrency", d.Name())
						return
					}
				}
			})
		}
	}
	wg.Wait()
}

// TestRenderPanicShowsSource checks the last line of defence with a
// dialect that panics: the source is shown, escaped, instead of lost.
func TestRenderPanicShowsSource(t *testing.T) {
	got := Render("  a **<b>**\n", panicky{TelegramHTML})
	if want := "a **&lt;b&gt;**"; got != want {
		t.Errorf("Render = %q, want %q", got, want)
	}
}

// panicky is a dialect whose paragraphs panic.
type panicky struct{ Dialect }

func (panicky) Paragraph(string, bool) string { panic("paragraph") }
