package telegram

import "testing"

// The rendering itself is tested in package markdown, with the golden
// files; this tests what the adapter adds.

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
