package telegram

import (
	"testing"

	"github.com/parley-chat/parley/adapters/markdown"
	"github.com/parley-chat/parley/core"
	"github.com/parley-chat/parley/core/delivery"
)

// The rendering itself is tested in package markdown, with the golden
// files; these tests cover what the adapter adds.

func TestHTMLOf(t *testing.T) {
	tests := []struct{ md, want string }{
		{"**a** < b", "<b>a</b> &lt; b"},
		// Nothing visible: Telegram refuses empty messages.
		{"[r]: https://example.com", "[r]: https://example.com"},
		{"[r]: https://example.com/?a<b", "[r]: https://example.com/?a&lt;b"},
	}
	for _, tt := range tests {
		if got := htmlOf(tt.md); got != tt.want {
			t.Errorf("htmlOf(%q) = %q, want %q", tt.md, got, tt.want)
		}
	}
}

func TestRenderedLength(t *testing.T) {
	a := &Adapter{}
	tests := []struct {
		md   string
		want int
	}{
		{"", 0},
		{"**bold** & <x>", len("bold & <x>")},
		{"😀 `code`", 2 + 1 + 4},
		// The plain-text fallback shows the URL: it is the longer one.
		{"[docs](https://go.dev/doc)", len("docs (https://go.dev/doc)")},
		{"[r]: https://example.com", len("[r]: https://example.com")},
		{"| a | b |\n|---|---|\n| 1 | 2 |", len("a | b\n--+--\n1 | 2")},
	}
	for _, tt := range tests {
		if got := a.RenderedLength(tt.md); got != tt.want {
			t.Errorf("RenderedLength(%q) = %d, want %d", tt.md, got, tt.want)
		}
	}
}

// TestRenderedLengthBoundsSends checks that what Send and Edit put in a
// message, in HTML or as the plain fallback, is never longer than
// RenderedLength says.
func TestRenderedLengthBoundsSends(t *testing.T) {
	a := &Adapter{}
	for _, md := range []string{
		"# Title\n\n- [a](https://a.example/long/path) and **b**\n- c\n\n> quote",
		"```go\nx := 1\n```\n\n1. one\n1. two",
		"[only a definition]: https://example.com",
	} {
		n := a.RenderedLength(md)
		if h := markdown.VisibleLength(htmlOf(md)); h > n {
			t.Errorf("%q: HTML visible length %d > RenderedLength %d", md, h, n)
		}
		if p := delivery.Measure(markdown.Render(md, markdown.Plain), core.UTF16); p > n {
			t.Errorf("%q: plain length %d > RenderedLength %d", md, p, n)
		}
	}
}
